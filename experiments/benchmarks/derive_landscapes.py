"""Derived landscapes: the recorded H200 bf16 GEMM landscape with a numerics choice added, where the fast setting
computes the wrong answer. They stand in for recordings not yet made; every row's time is a recorded bf16 time
times a stated factor, so the files say ``"derived": {...}`` and the benchmark labels them as derived.

    .venv/bin/python experiments/benchmarks/derive_landscapes.py [--source shared/landscapes/matmul_bf16_4096.json]

Writes experiments/results/search/landscapes/derived_*.json. What each one adds to the recorded space:

- derived_matmul_fp32_precision: SPLIT (bf16x3, tf32x3, none) x PRECISION (tf32, tf32x3, ieee), as the fp32 GEMM
  template (knowledge/templates/matmul.py) has them. PRECISION is read only when SPLIT is none (a split kernel's
  rows repeat one time for every PRECISION, as one kernel does). Plain TF32 is incorrect and 0.55x the
  bf16x3 time; tf32x3 split 1.95x, tf32x3 in registers 2.1x, ieee 4x (ratios of the template's measured H200
  times, docstring of matmul.py). Operands take 4 bytes per element pair (8 for the tf32x3 split), so the
  recorded shared-memory boundary, (BLOCK_M + BLOCK_N) x BLOCK_K x stages x bytes > 227 KB (it predicts all 96
  recorded OutOfResources exactly), moves: more configs fail, the recorded bf16 best among them.
- derived_matmul_fp16_acc: ACC (fp32, fp16): fp16 accumulation is incorrect and 0.9x the time.
- derived_matmul_unmasked_k: ASSUME_EVEN_K (False, True): dropping the K mask is 0.9x the time, correct only where
  BLOCK_K divides K (BLOCK_K 32 and 64 at K = 4160), incorrect elsewhere: incorrectness hangs on a pair of values.

Each derived time carries a deterministic per-row jitter (log-normal, sigma 1%), so that derived rows are not
exact multiples of their recorded source.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO.parent / "shared" / "landscapes" / "matmul_bf16_4096.json"
OUT = REPO / "experiments" / "results" / "search" / "landscapes"
SMEM_BYTES = 232_448  # nvidia-sm90 shared_memory_per_block_bytes (knowledge/hardware/nvidia-sm90.yaml)
TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")

# A derived row: (status, factor on the recorded ms, operand bytes per element pair for the shared-memory check).
Outcome = tuple[str, float, int]


def jitter(name: str, cfg: dict[str, Any]) -> float:
    """exp(N(0, 0.01)) drawn from a hash of the file and the config: the same on every run."""
    digest = hashlib.sha256((name + json.dumps(cfg, sort_keys=True)).encode()).digest()
    u1 = (int.from_bytes(digest[:8], "big") + 1) / 2**64
    u2 = int.from_bytes(digest[8:16], "big") / 2**64
    return math.exp(0.01 * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))


def fits(row: dict[str, Any], operand_bytes: int) -> bool:
    return (row["BLOCK_M"] + row["BLOCK_N"]) * row["BLOCK_K"] * row["num_stages"] * operand_bytes <= SMEM_BYTES


def fp32_precision(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    split, precision = extra["SPLIT"], extra["PRECISION"]
    if split == "bf16x3":
        return "ok", 1.0, 4
    if split == "tf32x3":
        return "ok", 1.95, 8
    return {"tf32": ("incorrect", 0.55, 4), "tf32x3": ("ok", 2.1, 4), "ieee": ("ok", 4.0, 4)}[precision]


def fp16_acc(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    return ("incorrect", 0.9, 2) if extra["ACC"] == "fp16" else ("ok", 1.0, 2)


def unmasked_k(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    if not extra["ASSUME_EVEN_K"]:
        return "ok", 1.0, 2
    return ("ok" if 4160 % row["BLOCK_K"] == 0 else "incorrect"), 0.9, 2


# name -> (added space, outcome, the parameters that decide the kernel (rows equal in these share one time), note)
DERIVED: dict[str, tuple[dict[str, list[Any]], Callable[[dict, dict], Outcome], Callable[[dict], tuple], str]] = {
    "derived_matmul_fp32_precision": (
        {"SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]}, fp32_precision,
        lambda e: (e["SPLIT"], e["PRECISION"] if e["SPLIT"] == "none" else None),
        "fp32 GEMM stand-in: plain TF32 fastest and incorrect, PRECISION read only when SPLIT is none"),
    "derived_matmul_fp16_acc": (
        {"ACC": ["fp32", "fp16"]}, fp16_acc, lambda e: (e["ACC"],),
        "fp16 GEMM stand-in: fp16 accumulation 0.9x the time and incorrect"),
    "derived_matmul_unmasked_k": (
        {"ASSUME_EVEN_K": [False, True]}, unmasked_k, lambda e: (e["ASSUME_EVEN_K"],),
        "unsafe fast path stand-in: no K mask, 0.9x the time, incorrect unless BLOCK_K divides K = 4160"),
}


def derive(source: dict[str, Any], source_name: str, name: str) -> dict[str, Any]:
    added, outcome, kernel_of, note = DERIVED[name]
    rows = []
    for base in source["rows"]:
        cfg = {k: base[k] for k in TILE_PARAMS}
        for values in itertools.product(*added.values()):
            extra = dict(zip(added, values, strict=True))
            status, factor, operand_bytes = outcome(base, extra)
            row = {**cfg, **extra}
            if base["status"] != "ok" or not fits(base, operand_bytes):
                rows.append({**row, "ms": None, "status": "OutOfResources"})
                continue
            scale = 1.0 if factor == 1.0 else factor * jitter(name, {**cfg, "kernel": kernel_of(extra)})
            rows.append({**row, "ms": base["ms"] * scale,
                         "rel_err": base.get("rel_err") if status == "ok" else 0.05, "status": status})
    return {"kernel": f"{source['kernel']} ({note})", "dtype": source.get("dtype"), "gpu": source["gpu"],
            "triton": source.get("triton"), "torch": source.get("torch"), "baseline_ms": source["baseline_ms"],
            "derived": {"from": source_name, "note": note,
                        "script": "experiments/benchmarks/derive_landscapes.py",
                        "measured": "the source rows' ms only; every other time is a stated factor of one"},
            "space": {**source["space"], **added}, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    source = json.loads(args.source.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    for name in DERIVED:
        data = derive(source, args.source.name, name)
        (args.out / f"{name}.json").write_text(json.dumps(data, indent=0) + "\n")
        ok = [r for r in data["rows"] if r["status"] == "ok"]
        best = min(r["ms"] for r in ok)
        fast_wrong = sum(r["status"] == "incorrect" and r["ms"] < best for r in data["rows"])
        print(f"{name}: {len(data['rows'])} configs, {len(ok)} correct, "
              f"{sum(r['status'] == 'incorrect' for r in data['rows'])} incorrect ({fast_wrong} faster than the best "
              f"correct), {sum(r['ms'] is None for r in data['rows'])} out of resources; best {best:.4f} ms, "
              f"{sum(r['ms'] <= 1.02 * best for r in ok)} correct configs within 2%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
