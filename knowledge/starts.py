"""Where a GEMM's search starts for the problem at hand: the knowledge base's shape rules.

A template's ``PARAMS`` are one point chosen for a typical large problem; cuBLAS and CUTLASS's own heuristics pick
a kernel per shape before anything is timed, and so does the campaign: for a task whose inputs are two matrices
(A (M, K), B (K, N)), ``shape_starts`` names the configs the rules below say to try alongside the seed. They are
evaluated with the seed (operator ``knowledge-start``), and the tuner walks from whichever is fastest. A rule only
ever proposes values the template's SPACE holds and the hard rules accept.

The rules (each a fact of the hardware, not a measured answer):

- **Fewer output tiles than SMs, long K** (M=N=256, K=524288 gives 2 tiles of 128x256 on 132 SMs): whole tiles
  leave the machine idle, so where the template offers stream-K (``TILES: streamk``) the K loop is split over
  the SMs. Each tile's partial sums are then reduced across the CTAs that share it, a cost that grows with the
  number of CTAs per tile: the tile shrinks to 128x128 (more tiles, fewer partials each; 128 rows is the
  cooperative schedule's least) and clusters go to 1x1 (their multicast shares operand loads between tiles that
  do not exist here). Two starts: the reduction in the order of a deterministic fixup, and in any order
  (``REDUCTION: nondeterministic``, bitwise results may differ run to run; the chain judges both alike).
  Where a Triton template offers ``SPLIT_K`` instead (knowledge/templates/matmul.py), the K loop is split into the
  fewest parts that give every SM a program, each part at least ``MIN_K_TILES`` K tiles, the partials summed in a
  fixed order.
- **K shorter than the K tile** (K=32 under a 64-deep tile): the tile's far half multiplies zero padding; the K
  tile becomes the largest the SPACE offers within K.
- **An fp32 GEMM template that can split its operands into bf16 parts** (``PRECISION`` offers ``bf16x3-split``,
  torch.compile's GEMM template in an Inductor seed): fp32 has no tensor cores, bf16 runs at twice TF32's rate, and
  the split parts take the fp32 tile's bytes (``split_starts``). Two starts: the split at the seed's tiles, and at
  128x128x64 with 8 warps and 3 stages (192 KB of operand buffers, within sm90's 227 KB; the tile of
  knowledge/templates/matmul.py's bf16 split). On the H200 the two ran 1.8-3.1x and 2.1-3.5x torch.compile on 15
  KernelBench GEMM tasks where the seed's start (three TF32 passes in the K loop) ran 0.93-1.66x
  (experiments/results/kernelbench/gemm_split_moves_2026-12-03.jsonl).
- **A convolution kernel whose dot can round its operands to TF32** (``PRECISION`` offers ``tf32-round``, the
  ``triton-conv`` kernel of mutators/conv_kernel.py) on an NVIDIA device: cuDNN computes an fp32 convolution in TF32
  by default (``torch.backends.cudnn.allow_tf32``), its operands rounded to nearest; where that is the reference's
  own arithmetic (15 of the 21 convolution tasks of issue R's sample on the H200,
  experiments/results/kernelbench/conv_algos_2026-12-04.jsonl) one TF32 pass on operands so rounded is as far from
  float64 as the reference and a third of the dot's work of the start's bf16 parts (``tf32_round_starts``). One
  start, every such kernel at once; where the reference is exact fp32 the chain refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evoforge.knowledge.hardware import _all_specs, _device, fact, resolve_arch
from evoforge.knowledge.legality import is_legal

K_TILE_KEYS = ("TILE_K", "BLOCK_K")
#: The fewest K tiles a split-K program is given: fewer and its partial's write and reduction outweigh its loop.
MIN_K_TILES = 4


@dataclass(frozen=True)
class Start:
    """A config to evaluate with the seed: the values to change, and the rule that says why."""

    change: dict[str, Any]
    why: str
    params: dict[str, Any] = field(default_factory=dict)  # the seed's params with ``change`` applied


def gemm_problem(shapes: Sequence[Sequence[int]]) -> tuple[int, int, int] | None:
    """(M, N, K) when the inputs are exactly two matrices A (M, K) and B (K, N); None otherwise."""
    if len(shapes) != 2 or any(len(s) != 2 for s in shapes):
        return None
    (m, k), (k2, n) = shapes
    return (int(m), int(n), int(k)) if k == k2 else None


def sm_count(arch: str, device: str | None = None) -> int | None:
    """The number of SMs (compute units) of ``arch``'s device (its reference device unless named)."""
    _, dev = _device(_all_specs()[resolve_arch(arch)], device)
    value = fact(dev.get("sm_count"))
    return int(value) if value else None


def shape_starts(space: dict[str, list[Any]], params: dict[str, Any], shapes: Sequence[Sequence[int]], arch: str,
                 *, source: str | None = None, elem_bytes: int | None = None) -> list[Start]:
    """The starts the shape rules give for a GEMM of input ``shapes`` from ``params`` (legal, distinct, and
    different from ``params``); [] when the inputs are not two matrices or no rule applies."""
    problem = gemm_problem(shapes)
    if problem is None:
        return []
    m, n, k = problem
    out: list[Start] = []
    seen: list[dict[str, Any]] = [dict(params)]

    def add(change: dict[str, Any], why: str) -> None:
        change = {key: v for key, v in change.items() if key in space and v in space[key] and params.get(key) != v}
        full = {**params, **change}
        if full in seen:
            return
        ok, _ = is_legal(full, arch, source=source, elem_bytes=elem_bytes)
        if ok:
            seen.append(full)
            out.append(Start(change=change, why=why, params=full))

    k_key = next((key for key in K_TILE_KEYS if key in space), None)
    short_k: dict[str, Any] = {}
    if k_key and isinstance(params.get(k_key), int) and k < params[k_key]:
        fitting = [v for v in space[k_key] if isinstance(v, int) and v <= k]
        if fitting:
            short_k = {k_key: max(fitting)}
            add(short_k, f"K={k} is shorter than the {params[k_key]}-deep K tile: {k_key} {max(fitting)}")

    sms = sm_count(arch)
    tm, tn = params.get("TILE_M"), params.get("TILE_N")
    if sms and "streamk" in space.get("TILES", []) and isinstance(tm, int) and isinstance(tn, int):
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        k_tile = params.get(k_key or "", 64) or 64
        if tiles < sms and k // k_tile >= 4 * max(1, sms // tiles):
            base = {"TILES": "streamk", "SCHEDULE": "cooperative", "SPLITS": 1, "TILE_M": 128, "TILE_N": 128,
                    "CLUSTER_M": 1, "CLUSTER_N": 1, **short_k}
            why = (f"{tiles} output tiles of {tm}x{tn} for {sms} SMs and K={k}: stream-K splits K over the idle "
                   "SMs, 128x128 tiles, no clusters")
            add({**base, "REDUCTION": "nondeterministic"}, why + ", partials reduced in any order")
            add({**base, "REDUCTION": "deterministic"}, why + ", partials reduced in a fixed order")
    bm, bn = params.get("BLOCK_M"), params.get("BLOCK_N")
    k_tile = params.get(k_key or "")
    if sms and "SPLIT_K" in space and all(isinstance(v, int) and v > 0 for v in (bm, bn, k_tile)):
        tiles = math.ceil(m / bm) * math.ceil(n / bn)
        k_tiles = math.ceil(k / short_k.get(k_key, k_tile))
        splits = sorted(v for v in space["SPLIT_K"] if isinstance(v, int) and v > 1 and k_tiles // v >= MIN_K_TILES)
        if tiles < sms and splits:
            split = next((v for v in splits if tiles * v >= sms), splits[-1])
            add({"SPLIT_K": split, **short_k},
                f"{tiles} output tiles of {bm}x{bn} for {sms} SMs and K={k}: SPLIT_K {split} splits the K loop over "
                f"the idle SMs ({tiles * split} programs, {k_tiles // split} K tiles each), partials summed in order")
    return out


#: The GEMM templates' split path (mutators/inductor_seed.py ``SPLIT_PRECISION``) and its tile where it fits.
SPLIT_PRECISION = "bf16x3-split"
SPLIT_TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}


def split_starts(space: dict[str, list[Any]], params: dict[str, Any], arch: str, *, source: str | None = None,
                 elem_bytes: int | None = None) -> list[Start]:
    """For every GEMM template whose ``PRECISION`` (``k0_PRECISION`` in a seed of several kernels) offers the bf16
    split and does not start there: the split at the seed's tiles, and the split at ``SPLIT_TILE`` (the values of
    it the template's SPACE offers), each where the hard rules accept it."""
    out: list[Start] = []
    seen: list[dict[str, Any]] = [dict(params)]
    for key, values in space.items():
        if not key.endswith("PRECISION") or SPLIT_PRECISION not in values or params.get(key) == SPLIT_PRECISION:
            continue
        prefix = key[: -len("PRECISION")]
        tile = {prefix + name: v for name, v in SPLIT_TILE.items() if v in space.get(prefix + name, [])}
        starts = [({key: SPLIT_PRECISION}, "fp32 GEMM: operands split into bf16 parts, bf16 tensor cores")]
        if len(tile) == len(SPLIT_TILE):  # the whole tile, or not this start (a part of it was never measured)
            starts.append(({key: SPLIT_PRECISION, **tile}, "fp32 GEMM: operands split into bf16 parts, "
                           + "x".join(str(SPLIT_TILE[n]) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
                           + f" tiles, {SPLIT_TILE['num_warps']} warps, {SPLIT_TILE['num_stages']} stages"))
        for change, why in starts:
            full = {**params, **change}
            if full in seen:
                continue
            ok, _ = is_legal(full, arch, source=source, elem_bytes=elem_bytes)
            if ok:
                seen.append(full)
                out.append(Start(change=change, why=why, params=full))
    return out


#: The convolution kernel's rounded-TF32 path (mutators/conv_kernel.py ``TF32_ROUND``).
TF32_ROUND = "tf32-round"


def tf32_round_starts(space: dict[str, list[Any]], params: dict[str, Any], arch: str, *, cudnn: bool,
                      source: str | None = None) -> list[Start]:
    """Where the reference's convolutions run in cuDNN (``cudnn``: the campaign's device is a CUDA one): one start
    with every ``PRECISION`` key that offers ``tf32-round`` (and does not start there) set to it, where the hard
    rules accept it; none elsewhere (on a CPU the reference's convolution is exact fp32)."""
    if not cudnn:
        return []
    change = {key: TF32_ROUND for key, values in space.items()
              if key.endswith("PRECISION") and TF32_ROUND in values and params.get(key) != TF32_ROUND}
    if not change:
        return []
    full = {**params, **change}
    ok, _ = is_legal(full, arch, source=source)
    if not ok:
        return []
    return [Start(change=change, why="fp32 convolution: operands rounded to TF32 as cuDNN's TF32 rounds them, one "
                  "TF32 pass (the reference's own arithmetic where cuDNN's TF32 computes it)", params=full)]
