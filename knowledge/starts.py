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
- **K shorter than the K tile** (K=32 under a 64-deep tile): the tile's far half multiplies zero padding; the K
  tile becomes the largest the SPACE offers within K.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evoforge.knowledge.hardware import _all_specs, _device, fact, resolve_arch
from evoforge.knowledge.legality import is_legal

K_TILE_KEYS = ("TILE_K", "BLOCK_K")


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
    return out
