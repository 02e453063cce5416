"""Where a seed's time goes beside torch.compile's own build (GPU): for each task, the seed that `evoforge run`
starts from (captured here, in this process) and torch.compile's default static build of the reference, timed
together as the re-timing scripts time them (mirrored do_bench medians, L2 flushed), then each profiled: the
device time of every kernel per call (torch.profiler), the host's time to enqueue one call (no sync), and one call's
span on the device after a sync (host overhead shows as the span over the kernels' sum).

    python3 -P experiments/benchmarks/seed_profile.py --task L2/47 --task L2/54 --allow-ops addmm,bmm,convolution,mm \\
        --out $OUT/seed_profile.jsonl

A row per task goes to ``--out``; a short table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _kernel_times(fn: Any, calls: int) -> dict[str, float]:
    """Device microseconds per call of each kernel ``fn`` launches (torch.profiler, ``calls`` calls)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
        if us and e.key and not e.key.startswith(("cudaDeviceSynchronize", "ProfilerStep")):
            out[e.key[:90]] = round(us / calls, 2)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _host_us(fn: Any, calls: int) -> float:
    """The host's median microseconds to enqueue one call (the device kept busy, so no call waits on it)."""
    import torch

    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
        if len(samples) % 8 == 0:
            torch.cuda.synchronize()
    return round(statistics.median(samples), 1)


def _span_us(fn: Any, calls: int) -> float:
    """One call from an idle device: events around it, the host's enqueue cost included where the device waits."""
    import torch

    spans = []
    for _ in range(calls):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        spans.append(a.elapsed_time(b) * 1e3)
    return round(statistics.median(spans), 1)


def profile_task(spec: str, allow_ops: list[str], seed_dir: Path | None = None,
                 placements: int = 0) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import h200_suite  # noqa: E402
    import kernelbench_coverage  # noqa: E402
    from evoforge.mutators.inductor_capture import capture
    from evoforge.mutators.inductor_seed import seed_from_capture

    from evoforge.task import Task, resolve_task_path

    path = str(resolve_task_path(spec))
    task = Task.load(spec)
    t0 = time.perf_counter()
    cap = capture(path, device="cuda", variants=False, allow_ops=tuple(allow_ops))
    row: dict[str, Any] = {"spec": spec, "capture_s": round(time.perf_counter() - t0, 1)}
    source = seed_from_capture(cap, allow_ops=tuple(allow_ops))
    given = seed_dir / f"{task.name.replace('/', '_')}.py" if seed_dir else None
    seed_file = (Path(os.environ["SEED_PROFILE_KEEP"]) if os.environ.get("SEED_PROFILE_KEEP")
                 else Path(tempfile.mkdtemp())) / f"{task.name.replace('/', '_')}.py"
    seed_file.parent.mkdir(parents=True, exist_ok=True)
    seed_file.write_text(source)  # $SEED_PROFILE_KEEP: the captured seeds kept there
    row["seed_file_lines"] = source.count("\n")
    ref = h200_suite.time_reference(task)
    fns = {"compile": ref["compile"], "seed": h200_suite.time_best(task, source, {})}
    if given is not None and given.exists():  # a campaign's seed (RUN/seeds), beside the one captured here
        fns["given_seed"] = h200_suite.time_best(task, given.read_text(), {})
        row["given_seed_same_source"] = given.read_text() == source
    if placements:  # a second instance of the same seed: what loading the same code twice changes
        fns["seed_again"] = h200_suite.time_best(task, source, {})
    with torch.no_grad():
        row["ms"] = kernelbench_coverage._bench_together(fns)
        if placements:
            row["placement_ms"] = kernelbench_coverage.placement_times(fns, placements)
            row["placement_vs_compile"] = {
                k: [round(c / t, 4) for c, t in zip(row["placement_ms"]["compile"], v, strict=True)]
                for k, v in row["placement_ms"].items() if k != "compile"}
        for name, fn in fns.items():
            row[f"{name}_kernels_us"] = _kernel_times(fn, 20)
            row[f"{name}_kernel_sum_us"] = round(sum(row[f"{name}_kernels_us"].values()), 1)
            row[f"{name}_host_us"] = _host_us(fn, 64)
            row[f"{name}_span_us"] = _span_us(fn, 30)
    row["seed_vs_compile"] = round(row["ms"]["compile"] / row["ms"]["seed"], 4)
    if "given_seed" in row["ms"]:
        row["given_seed_vs_compile"] = round(row["ms"]["compile"] / row["ms"]["given_seed"], 4)
    torch.cuda.empty_cache()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", action="append", required=True)
    ap.add_argument("--allow-ops", default="", help="comma-separated vendor ops the seed may call")
    ap.add_argument("--seeds", type=Path, help="a campaign's RUN/seeds folder: its seed timed beside the one captured")
    ap.add_argument("--placements", type=int, default=0,
                    help="also time every function under this many allocator states (and a second instance of the "
                         "seed): how much of a difference is where the buffers land")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    allow = [o for o in args.allow_ops.split(",") if o]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in args.task:
        try:
            row = profile_task(spec, allow, args.seeds, args.placements)
        except Exception as e:  # noqa: BLE001  (recorded; the next task runs)
            row = {"spec": spec, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        rows.append(row)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
    print("task | compile ms | seed ms | seed vs compile | kernels us (compile/seed) | host us | span us")
    for r in rows:
        if "error" in r:
            print(r["spec"], r["error"])
            continue
        print(f"{r['spec']} | {r['ms']['compile']:.4f} | {r['ms']['seed']:.4f} | {r['seed_vs_compile']} | "
              f"{r['compile_kernel_sum_us']}/{r['seed_kernel_sum_us']} | {r['compile_host_us']}/{r['seed_host_us']} | "
              f"{r['compile_span_us']}/{r['seed_span_us']} | given seed vs compile {r.get('given_seed_vs_compile')} "
              f"same source {r.get('given_seed_same_source')}")
        for k, v in (r.get("placement_vs_compile") or {}).items():
            print(f"  {k} vs compile over allocator states: min {min(v)} median {statistics.median(v)} max {max(v)}")


if __name__ == "__main__":
    main()
