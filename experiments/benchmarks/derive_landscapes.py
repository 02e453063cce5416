"""Derived landscapes: the recorded H200 bf16 GEMM landscape with a numerics choice added, where the fast setting
computes the wrong answer. They stand in for recordings not yet made; every row's time is a recorded bf16 time
times a stated factor, so the files say ``"derived": {...}`` and the benchmark labels them as derived.

    .venv/bin/python experiments/benchmarks/derive_landscapes.py [--source shared/landscapes/matmul_bf16_4096.json]

Writes experiments/results/search/landscapes/derived_*.json, one stand-in per landscape that
experiments/benchmarks/record_landscape.py records, over the same space (the recorded bf16 space restricted to the
recorder's tile values, GROUP_M 8), plus one with an unsafe fast path whose incorrectness hangs on a tile size:

- derived_matmul_fp32_split (for matmul_fp32_split_4096): SPLIT (bf16x3, tf32x3, none) x PRECISION (tf32, tf32x3,
  ieee), as the fp32 GEMM template (knowledge/templates/matmul.py) has them. PRECISION is read only when SPLIT is
  none (a split kernel's row repeats once for every PRECISION, as one kernel would). Plain TF32 is incorrect and
  0.55x the bf16x3 time (the recorded one); tf32x3 split 1.95x, tf32x3 in registers 2.1x, ieee 4x (ratios of the
  template's measured H200 times, docstring of matmul.py).
- derived_matmul_fp16_acc (for matmul_fp16_acc_4096): ACC (fp32, fp16): an fp16 accumulator is incorrect, 0.9x.
- derived_matmul_fp16_fp8 (for matmul_fp16_fp8_4096): OPERANDS (fp16, fp8): fp8 operands are incorrect, 0.6x.
- derived_matmul_unmasked_k: ASSUME_EVEN_K (False, True): dropping the K mask is 0.9x the time, correct only where
  BLOCK_K divides K (BLOCK_K 32 and 64 at K = 4160), incorrect elsewhere: incorrectness hangs on a pair of values.

Every derived time is the recorded time of the same tiles times the stated factor, and the recorded resource
failures are kept as they are (a kernel on fp32 operands would run out of shared memory sooner): the tile
landscape under each choice is the recorded one, and what a search meets anew is the choice and its incorrect
configs, nothing else.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO.parent / "shared" / "landscapes" / "matmul_bf16_4096.json"
OUT = REPO / "experiments" / "results" / "search" / "landscapes"
TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")

# A derived row: (status, factor on the recorded ms).
Outcome = tuple[str, float]


def fp32_precision(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    split, precision = extra["SPLIT"], extra["PRECISION"]
    if split == "bf16x3":
        return "ok", 1.0
    if split == "tf32x3":
        return "ok", 1.95
    return {"tf32": ("incorrect", 0.55), "tf32x3": ("ok", 2.1), "ieee": ("ok", 4.0)}[precision]


def fp16_fp8(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    return ("incorrect", 0.6) if extra["OPERANDS"] == "fp8" else ("ok", 1.0)


def fp16_acc(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    return ("incorrect", 0.9) if extra["ACC"] == "fp16" else ("ok", 1.0)


def unmasked_k(row: dict[str, Any], extra: dict[str, Any]) -> Outcome:
    if not extra["ASSUME_EVEN_K"]:
        return "ok", 1.0
    return ("ok" if 4160 % row["BLOCK_K"] == 0 else "incorrect"), 0.9


FP32_TILES = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64], "GROUP_M": [8],
              "num_warps": [4, 8], "num_stages": [2, 3, 4]}
FP16_TILES = {**FP32_TILES, "BLOCK_K": [32, 64, 128], "num_stages": [2, 3, 4, 5]}

WHEN = {"derived_matmul_fp32_split": {"PRECISION": {"SPLIT": ["none"]}}}  # PRECISION is read only when SPLIT is none
DTYPES = {"derived_matmul_fp32_split": "torch.float32", "derived_matmul_fp16_acc": "torch.float16",
          "derived_matmul_fp16_fp8": "torch.float16", "derived_matmul_unmasked_k": "torch.bfloat16"}

# name -> (tile values kept, added space, outcome, note)
DERIVED: dict[str, tuple[dict[str, list[Any]], dict[str, list[Any]], Callable[[dict, dict], Outcome], str]] = {
    "derived_matmul_fp32_split": (
        FP32_TILES, {"SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]}, fp32_precision,
        "fp32 GEMM stand-in: plain TF32 fastest and incorrect, PRECISION read only when SPLIT is none"),
    "derived_matmul_fp16_acc": (
        FP16_TILES, {"ACC": ["fp32", "fp16"]}, fp16_acc,
        "fp16 GEMM stand-in: fp16 accumulation 0.9x the time and incorrect"),
    "derived_matmul_fp16_fp8": (
        FP16_TILES, {"OPERANDS": ["fp16", "fp8"]}, fp16_fp8,
        "fp16 GEMM stand-in: fp8 operands 0.6x the time and incorrect"),
    "derived_matmul_unmasked_k": (
        FP16_TILES, {"ASSUME_EVEN_K": [False, True]}, unmasked_k,
        "unsafe fast path stand-in: no K mask, 0.9x the time, incorrect unless BLOCK_K divides K = 4160"),
}


def derive(source: dict[str, Any], source_name: str, name: str) -> dict[str, Any]:
    tiles, added, outcome, note = DERIVED[name]
    rows = []
    for base in source["rows"]:
        cfg = {k: base[k] for k in TILE_PARAMS}
        if any(cfg[k] not in tiles[k] for k in TILE_PARAMS):
            continue
        for values in itertools.product(*added.values()):
            extra = dict(zip(added, values, strict=True))
            status, factor = outcome(base, extra)
            row = {**cfg, **extra}
            if base["status"] != "ok":
                rows.append({**row, "ms": None, "status": base["status"]})
                continue
            rows.append({**row, "ms": base["ms"] * factor,
                         "rel_err": base.get("rel_err") if status == "ok" else 0.05, "status": status})
    # Its resource failures are the recording's (bf16 tiles): the knowledge base judges them at 2 bytes an element.
    return {"kernel": f"{source['kernel']} ({note})", "dtype": DTYPES[name], "elem_bytes": 2, "gpu": source["gpu"],
            "triton": source.get("triton"), "torch": source.get("torch"), "baseline_ms": source["baseline_ms"],
            "derived": {"from": source_name, "note": note,
                        "script": "experiments/benchmarks/derive_landscapes.py",
                        "measured": "the source rows' ms only; every other time is a stated factor of one"},
            "space": {**tiles, **added}, **({"when": WHEN[name]} if name in WHEN else {}), "rows": rows}


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
