"""The reference's outputs, computed once per draw and kept by the evaluation process (issue Y).

Candidates of a task meet the same draws again (the chain's fixed seeds; in a campaign, the pool of earlier draws
its evaluations pick from, ``draw_seeds``), so the reference's output for a draw, its float64 outputs where the
comparison needs them and whether it writes to its inputs are the same for every candidate: recomputing them per candidate kept the GPU busy with the
judge's own work (a float64 convolution can take longer than the candidate's whole check). The memo lives in the
judge's process (judge/worker.py keeps one chain per backend), never where a candidate can reach it.

What is kept is bounded: the device's outputs stay on the device while they fit ``REFERENCE_MEMO_SHARE`` of its
memory (a few GiB on a GPU, ``HOST_BUDGET_BYTES`` on the CPU); a draw that does not fit is recomputed as before.
Room is made by dropping the least recently used *other* task's entries, never the current task's own (a task's
draws are used in the same order every evaluation: dropping its oldest to keep its newest would miss on every
one). A key names everything the outputs depend on: the task (its file's text and sizes), the shape, the device,
the seed of the reference's weights and the draw's own seed and variant.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from evoforge.judge.arena import iter_tensors

from evoforge.task import Task

#: The share of a GPU's memory one evaluation process may keep reference outputs in (two evaluators share a GPU by
#: default; the judge's copies for a task still count toward judge/chain.py's JUDGE_HOLDS_SHARE).
REFERENCE_MEMO_SHARE = 0.10
#: On the CPU (the interpreter): the budget in bytes.
HOST_BUDGET_BYTES = 512 << 20
#: Fresh draws a task's pool keeps (``ChainOptions.fresh_draws``), beside the chain's fixed ones: an evaluation's
#: other draws are picked among these, so a candidate cannot tell which of them it will meet.
POOL_FRESH = 16


@dataclass
class ReferenceDraw:
    """The reference's answer to one draw, kept as computed (cloned: nothing the reference holds is aliased)."""

    expected: Any
    mutates_inputs: bool
    nbytes: int
    lazy: dict[str, Any] = field(default_factory=dict)  # "reference64", "rounded64": computed where needed


def task_key(task: Task) -> str:
    """The task as the reference sees it: its file's text, its sizes and extra shapes (not its name alone: an
    ablation's processes can serve several versions of one task)."""
    try:
        text = Path(task.path).read_text()
    except (OSError, TypeError):
        text = ""
    payload = json.dumps({"task": task.to_dict(), "source": text}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _detached_clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(_detached_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached_clone(v) for k, v in value.items()}
    return value


def _bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in iter_tensors(value))


def budget_bytes(device: str) -> int:
    """What one process may keep: ``REFERENCE_MEMO_SHARE`` of a GPU's memory, ``HOST_BUDGET_BYTES`` elsewhere."""
    if device.startswith("cuda") and torch.cuda.is_available():
        try:
            return int(REFERENCE_MEMO_SHARE * torch.cuda.get_device_properties(device).total_memory)
        except Exception:  # noqa: BLE001  (no figure: keep nothing rather than guess)
            return 0
    xpu = getattr(torch, "xpu", None)
    if device.startswith("xpu") and xpu is not None and xpu.is_available():
        try:
            return int(REFERENCE_MEMO_SHARE * xpu.get_device_properties(device).total_memory)
        except Exception:  # noqa: BLE001
            return 0
    return HOST_BUDGET_BYTES


class ReferenceMemo:
    """Draw key -> ``ReferenceDraw``, bounded by ``budget`` bytes; hits and misses counted for the result."""

    def __init__(self, *, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self._draws: OrderedDict[tuple[Any, ...], ReferenceDraw] = OrderedDict()
        self._odd: dict[str, list[dict[str, Any]]] = {}  # task key -> the odd shapes the chain chose for it
        self._models: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()  # the loaded reference, its bytes
        self._pools: dict[tuple[str, str], list[int]] = {}  # (task key, shape) -> seeds of fresh draws, oldest first
        self.hits = self.misses = 0

    def get(self, key: tuple[Any, ...]) -> ReferenceDraw | None:
        draw = self._draws.get(key)
        if draw is None:
            self.misses += 1
            return None
        self._draws.move_to_end(key)
        self.hits += 1
        return draw

    def keep(self, key: tuple[Any, ...], expected: Any, *, mutates_inputs: bool) -> ReferenceDraw:
        """The draw as computed; kept for the next candidate if it fits (else returned, not kept)."""
        nbytes = _bytes(expected)
        kept = _detached_clone(expected) if self._room(key[0], nbytes) else None
        draw = ReferenceDraw(expected if kept is None else kept, mutates_inputs, nbytes)
        if kept is not None:
            self._draws[key] = draw
            self.held += nbytes
        return draw

    def lazy(self, key: tuple[Any, ...], draw: ReferenceDraw, name: str, compute: Callable[[], Any]) -> Any:
        """A derived output of the draw (its float64 reference), computed on first need and kept if it fits."""
        if name in draw.lazy:
            return draw.lazy[name]
        value = compute()
        nbytes = _bytes(value)
        if key in self._draws and self._room(key[0], nbytes):
            draw.lazy[name] = _detached_clone(value)
            draw.nbytes += nbytes
            self.held += nbytes
        return value

    def model(self, key: tuple[Any, ...]) -> Any | None:
        """The task module and reference instance loaded at a shape (judge/chain.py's ``_Loaded``): a 8192x8192
        Linear takes half a second to initialise on the host, twice an evaluation (main and odd shape)."""
        held = self._models.get(key)
        if held is None:
            return None
        self._models.move_to_end(key)
        return held[0]

    def keep_model(self, key: tuple[Any, ...], model: Any, nbytes: int) -> None:
        if self._room(key[0], nbytes):
            self._models[key] = (model, nbytes)
            self.held += nbytes

    def draw_seeds(self, pool: tuple[str, str], fixed: list[int]) -> list[int]:
        """Seeds for ``len(fixed)`` draws at a shape that the candidate cannot predict: the first a new secret
        seed (added to the pool), the others picked at random, without repeats, among the pool's earlier fresh
        draws and ``fixed`` (the chain's own seeds, which a first evaluation starts from)."""
        earlier = self._pools.setdefault(pool, [])
        fresh = secrets.randbits(62)
        choices = list(dict.fromkeys([*earlier, *fixed]))
        picked = secrets.SystemRandom().sample(choices, min(len(fixed) - 1, len(choices)))
        earlier.append(fresh)
        del earlier[:-POOL_FRESH]
        return [fresh, *picked]

    def odd_shapes(self, task: str) -> list[dict[str, Any]] | None:
        return self._odd.get(task)

    def keep_odd_shapes(self, task: str, shapes: list[dict[str, Any]]) -> None:
        self._odd[task] = [dict(s) for s in shapes]

    def clear(self) -> None:
        """Everything dropped (the judge ran out of device memory: its own copies go first)."""
        self._draws.clear()
        self._models.clear()
        self.held = 0

    def _room(self, task: str, nbytes: int) -> bool:
        if nbytes > self.budget:
            return False
        for table in (self._draws, self._models):
            for other in [k for k in table if k[0] != task]:  # least recently used first
                if self.held + nbytes <= self.budget:
                    return True
                held = table.pop(other)
                self.held -= held.nbytes if isinstance(held, ReferenceDraw) else held[1]
        return self.held + nbytes <= self.budget
