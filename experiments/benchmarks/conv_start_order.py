"""Issue U: which of a strict convolution task's two starts was faster, read from a campaign's own record.

For each task of the given campaign archives (``conv_family_campaign_run_part*_h100.tgz``: a run folder with its
``optuna.db``), the seed's trial (operator ``inductor-seed``: then torch.compile's strict build, each convolution a
window gather and a GEMM) and the ``triton-conv`` variant's (operator ``inductor-variant``), their statuses and
times as the campaign recorded them. The figures behind the strict rule's choice of seed (evoforge/starts/inductor.py).

    .venv/bin/python experiments/benchmarks/conv_start_order.py \\
        experiments/results/kernelbench/conv_family_campaign_run_part*_h100.tgz
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path


def trials(archive: Path) -> dict[str, dict[str, dict]]:
    """task -> {"seed": attrs, "triton-conv": attrs} (each the first such trial), from the archive's optuna.db."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        out: dict[str, dict[str, dict]] = {}
        for db in Path(tmp).rglob("optuna.db"):
            storage = f"sqlite:///{db}"
            for summary in optuna.get_all_study_summaries(storage):
                study = optuna.load_study(study_name=summary.study_name, storage=storage)
                found: dict[str, dict] = {}
                for t in study.trials:
                    ua = t.user_attrs
                    which = "seed" if ua.get("operator") == "inductor-seed" else (
                        "triton-conv" if ua.get("operator") == "inductor-variant"
                        and "conv0_BLOCK_M" in json.loads(ua.get("params") or "{}") else None)
                    if which and which not in found:
                        found[which] = {"status": ua.get("status"), "ms": ua.get("runtime_ms"),
                                        "message": (ua.get("message") or "")[:120]}
                out[summary.study_name.split("/", 1)[1]] = found
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", nargs="+", type=Path)
    args = ap.parse_args()
    rows = {task: found for archive in args.archives for task, found in trials(archive).items()}
    both = {t: f for t, f in rows.items() if all(f.get(k, {}).get("status") == "ok" for k in ("seed", "triton-conv"))}
    faster = [t for t, f in both.items() if f["triton-conv"]["ms"] < f["seed"]["ms"]]
    seed_failed = [t for t, f in rows.items() if f.get("seed", {}).get("status") not in (None, "ok")]
    print("| task | seed | seed ms | triton-conv | triton-conv ms |\n| --- | --- | ---: | --- | ---: |")
    for task, f in sorted(rows.items()):
        s, c = f.get("seed", {}), f.get("triton-conv", {})
        print(f"| {task} | {s.get('status', '-')} | {s.get('ms') or ''} | {c.get('status', '-')} | {c.get('ms') or ''} |")
    judge_oom = [t for t in seed_failed if "judge ran out of device memory" in rows[t]["seed"]["message"]]
    print(f"\nboth correct: {len(both)}; triton-conv faster: {len(faster)} of them; "
          f"the seed failed: {len(seed_failed)} ({', '.join(sorted(seed_failed))}); of those, the judge out of device "
          f"memory: {len(judge_oom)}, the seed's own forward raised: {len(seed_failed) - len(judge_oom)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
