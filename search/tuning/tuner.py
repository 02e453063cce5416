"""The default parameter tuner of one structure: an Optuna sampler to start, then boundary-seeking local search.

Measured on recorded H200 landscapes (see experiments/results/search/), three generic facts make this fast:
- the fast configs sit together, but moves that only work in pairs (a bigger tile needs more warps; a deeper
  pipeline needs a smaller K step) make one-parameter hill climbing stall: the walk uses every config within
  two ordinal steps of the best found (radius 1 and 2), drawn at random;
- models that ranked those neighbours (ridge regression with pairwise terms, GP expected improvement, Thompson
  sampling) did worse than drawing them at random, so no value model orders the walk; the Optuna sampler,
  told every result, proposes whenever the walk is stuck (the best's neighbourhood is used up);
- resource failures (OutOfResources) mark where the chip is full, and the fastest configs use as much of it as
  fits: once a failure is seen, a failure model (logistic, plus monotonicity in the dimensions it finds
  resource-like) skips neighbours that will not fit, and the walk prefers neighbours next to the learned
  boundary (``boundary=False`` turns that off: 0.54 instead of 0.72-0.8 on matmul_bf16_4096 at budget 30);
- with no failure seen there is no boundary to follow, and a plain walk is weak on a flat landscape. Where the
  knowledge base said nothing of the space either (no unsafe value, no parameters that grow together), the walk
  shares the proposals with a second sampler, Optuna's TPE (``explorer``), told every result, each source as often
  as its proposals have improved the incumbent on this task (Thompson sampling, ``bandit.BetaBandit``). Which one
  is stronger depends on the landscape, not on a kind of kernel: on rmsnorm_fp32_32x100x300x300 (best configs next
  to each other) the walk, on softmax_fp16_32768x1024 (best configs in a corner) TPE; a fixed share bets on one
  (200 seeds at 20, TPE every 3rd proposal: 0.94 / 0.945, every 2nd: 0.895 / 0.98; the sampler's, CMA-ES's,
  every 3rd, as before: 0.87 / 0.815; Optuna TPE alone 0.92 / 0.99). Where the knowledge base gave hints (the
  GEMMs) every ``explore_every``-th proposal is the tuner's sampler's, as before: shared there, the walk lost
  0.015 / 0.01 at 20 / 30 on the whole fp32 GEMM (matmul_fp32_split_4096, 200 seeds). Any failure or
  knowledge-base refusal ends both: where something fails the landscape has structure, and the walk is the faster
  learner (derived fp32 split at 30, 400 seeds: 0.74 -> 0.87 with the knowledge base, whose refusals are seen at
  once). The start stays the tuner's sampler's (CMA-ES's centred proposals, ``default.default_sampler``);
- a walk anchored at the best config stops at a local optimum whose two-step neighbourhood holds nothing faster
  (on the H200 fp8-operand GEMM: 256x128x64 at 1.05x, four steps from the best 128x256x32). Iterated local
  search's answer, kept cheap: once ``patience`` results have not improved the best and at least ``settled`` of
  its neighbourhood (run, or still worth running) has run, every ``escape_every``-th move is a two-step move from
  one of the next ``escape_anchors`` best configs (found around the optimum) to a config beyond the optimum's own
  reach, up to four steps away; a gain there moves the walk. On the development landscapes this costs nothing
  measurable (a walk that is still gaining never counts as settled). While stuck, the other moves walk the
  neighbourhoods of every config within ``ties`` (2%) of the incumbent together: a near-tie far from it (the
  transposed tile, 128x256x64 at 1.062x) is as good a basin to search, and its two-step neighbourhood held the
  best (recorded fp8-operand GEMM with the knowledge base, 100 seeds at 30: 0.75 -> 0.92; the other landscapes
  unchanged within their noise).
- a categorical value no config has run with is run, flipped alone at the incumbent's tiles, once ``probe_after``
  results in a row have not improved the incumbent (``probe_untried``): the start (CMA-ES's five configs) may miss a
  path, and a path never timed is neither mirrored nor transferred to. Run at once instead, it spent an evaluation
  the walk needed early on the grouped fp32 GEMM (200 seeds at 30: 0.895 -> 0.83; after three: 0.87).
  Where a path's cost moves with the tiles, the pair timed at the incumbent's own tiles, where there is one, decides
  whether the walk may move onto that path (``local_cost``), not the mean over pairs timed elsewhere. On L2/1's
  convolution (every precision correct, the rounded-TF32 path 0.16x-1.74x the bf16 split's over the tiles; 200
  seeds, P at 20 / 30 / 50): 0.345 / 0.595 / 0.795 -> 0.35 / 0.615 / 0.84; on the H200 fp8-operand GEMM (100 seeds)
  0.34 / 0.93 -> 0.53 / 0.98; every figure in experiments/results/search/README.md.
- the resource model's monotone rule (at least as large as a failure fails) holds across categorical paths only
  where no path was seen to change the time by more than ``own_path_factor`` (1.3x) at equal tiles: such a choice
  changes the work a tile does, and with it what the tile costs. Read across paths, a tf32x3 split's failure
  condemned the same tiles on the bf16x3 split, the fp32 GEMM's best config, which then never ran (recorded
  H200 landscape, whole, 100 seeds at 30: 0.54 -> 0.63, with the KB 0.62 -> 0.73; at 50 with the KB 0.84 ->
  0.97). A choice that changes the time less (no K mask: 0.9x) keeps one boundary for both paths: made certain
  only on the own path for every choice, derived_matmul_unmasked_k lost 0.065 relearning it per path.
- a path seen to change the time by more than ``own_path_factor`` at equal tiles is a factor on every tile: the
  config predicted fastest of those pairing tiles timed on one path with such a path (the time there times the
  ratio of the two paths) is run next when the prediction beats the incumbent (``transfer``), so a walk that
  started on the slower split moves to the faster one with its best tiles; and a move never timed whose change
  holds one seen to cost time (the tf32x3 split, timed with one PRECISION) is taken to cost time too
  (``choices``, ``compose``). On the whole recorded fp32 GEMM (100 seeds at 30): 0.63 -> 0.68, with the KB 0.73 ->
  0.75; derived fp32 split 0.67 -> 0.71, with the KB 0.89 -> 0.93; every other landscape unchanged.
- a tile dimension and the warps that hold its accumulator grow together (the knowledge base's register rule:
  rows x columns / warps is the accumulator a thread holds), so growing both by one step is one step of the walk
  (``moves_together``, given by a campaign with the knowledge base on). On the whole recorded fp32 GEMM the walk
  settles at 64x128x32 with 4 warps (1.07x), and the best, 128x128x64 with 8 warps, is three plain steps from it
  past configs 1.17x and slower: with the KB, 200 seeds at 30, 0.775 -> 0.89 (held-out seeds 200..399: 0.68 ->
  0.865). Only growing: a joint shrink too cost the fp8-operand GEMM 0.94 -> 0.72 (its basin already has the most
  warps, so the shrinking moves filled its pool).

A failure is not always a size boundary. An incorrect result (or a rejected, crashed or hung run) is a property of
the config's values, usually a categorical choice (a dot precision, an fp16 accumulator, fp8 operands), and the
fastest correct config often sits right next to it (the same tiles, a safe precision). Treated as a boundary it
pulls the walk towards the incorrect region and, through the monotone rule, condemns every larger tile; told to a
sampler as a penalty it pushes the sampler away from good tiles. So (``proposals.FailureKind``):
- the resource model learns from resource failures only (an incorrect config ran: it fits), and compares tile
  sizes only among configs that agree on the choices seen to change what a tile costs (``surrogate``);
- a cause model (``causes``) learns which values, alone or in pairs, make a config incorrect; the walk skips
  neighbours it predicts incorrect (one incorrect config cannot tell which of its values is to blame, so a choice
  flipped alone at the best config's tiles, the experiment that settles it, may go up to ``probe_threshold``:
  0.86 instead of 0.79 on derived_matmul_unmasked_k, where the suspected value is safe with most tile sizes),
  and a sampler proposal it predicts incorrect is replaced, with that
  probability, by the nearest config predicted correct that keeps the sampler's tile sizes; the sampler is told
  an incorrect result as a FAIL trial (no value at all), never as a penalty; causes the knowledge base names in
  advance (``known_causes``) are never proposed until a correct config holding them is seen;
- what each categorical path costs against another at equal tiles (``choices``) is remembered: a flip that
  changes nothing (a precision the split kernels never read) is not paid for twice, and a path seen to cost time
  is not walked into again, nor entered together with a tile change before it was timed alone. A path's cost is
  learned on the incumbent's path: the tiles of a config timed on another path are run on the incumbent's
  (``mirror``), not the incumbent's tiles on the other path; and a sampler proposal on a path timed slower is
  moved to its tiles on the incumbent's path (a path that costs a factor everywhere teaches nothing about tiles).
On derived stand-ins of the fp32 split/precision, fp16-accumulate and fp8-operand landscapes (budget 30), these
took the default from 0.17 / 0.22 (random search: 0.19 / 0.16) to 0.68 / 1.0; see
experiments/results/search/search_bench.md for the current figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from evoforge.search.strategies.proposals import FailureKind
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.bandit import BetaBandit
from evoforge.search.tuning.causes import CauseModel, Literal
from evoforge.search.tuning.choices import ChoiceEffects
from evoforge.search.tuning.optuna_tuner import OptunaTuner
from evoforge.search.tuning.surrogate import FailureModel

_TWIN_RETRIES = 3
WALK, EXPLORE = "walk", "explore"  # the proposal sources after the start


class StructureTuner:
    """Proposes grid points of one ``ParamSpace``; ``tell`` takes runtime_ms, or None and the failure's kind."""

    def __init__(self, *, space: ParamSpace, seed: int, sampler: str = "tpe", n_start: int = 5,
                 anchors: int = 1, fail_threshold: float = 0.5, boundary: bool = True,
                 boundary_threshold: float = 0.7, explore_every: int = 3, explorer: str | None = "tpe",
                 wrong_threshold: float = 0.5,
                 probe_threshold: float = 0.8, known_causes: Sequence[Sequence[Literal]] = (),
                 patience: int = 3, settled: float = 0.7, escape_anchors: int = 3, escape_every: int = 2,
                 mirror: bool = True, ties: float = 0.02, own_path_factor: float = 1.3, transfer: bool = True,
                 compose: bool = True, moves_together: Sequence[Sequence[str]] = (),
                 probe_untried: bool = True, probe_after: int = 3, local_cost: bool = True) -> None:
        self.probe_untried = probe_untried
        self.probe_after = probe_after
        self.local_cost = local_cost
        self.probes = 0
        # groups of dimensions grown by one step each in a single move (the knowledge base's moves_together)
        self.together = [tuple(space.names.index(n) for n in group) for group in moves_together
                         if len(group) > 1 and all(n in space.names and space.ordinal[space.names.index(n)]
                                                   for n in group)]
        self._reach_cache: dict[tuple[int, ...], list[tuple[int, ...]]] = {}  # _reach depends on the space only
        self.own_path_factor = own_path_factor
        self.transfer = transfer
        self.transfers = 0
        self.ties = ties
        self.explore_every = explore_every
        # the exploring source where the knowledge base said nothing of the space: a second sampler that reads every
        # result (the tuner's own where it is the same kind); None: the sampler's every ``explore_every``-th everywhere
        self.explorer = explorer
        self._own_explorer = explorer == sampler
        self.explored = 0
        self._explorer_seed = seed + 104_729
        self._explorer: OptunaTuner | None = None  # its study, once it first proposes
        self.sources = BetaBandit((WALK, EXPLORE), seed=seed + 3_571)
        self._source_of: dict[tuple[int, ...], str] = {}  # proposals under way of the walk or the explorer
        self.patience = patience
        self.settled = settled
        self.escape_anchors = escape_anchors
        self.escape_every = escape_every
        self._since_improvement = 0  # results told since the best last improved
        self._stuck_moves = 0
        self.escapes = 0
        self.space = space
        self.sampler = OptunaTuner(space=space, sampler=sampler, seed=seed,
                                   n_startup_trials=max(n_start, 1) if sampler in ("tpe", "gp") else None)
        self.n_start = n_start
        self.anchors = anchors
        self.fail_threshold = fail_threshold
        self.boundary = boundary
        self.boundary_threshold = boundary_threshold
        self._rng = np.random.default_rng(seed + 7_919)
        self.results: dict[tuple[int, ...], float | None] = {}
        self.refused: set[tuple[int, ...]] = set()
        self.pending: set[tuple[int, ...]] = set()
        self.local_moves = 0
        self._failure_model: FailureModel | None = None
        self._pfail_cache: dict[tuple[int, ...], float] = {}
        self.wrong_threshold = wrong_threshold
        self.probe_threshold = probe_threshold
        self.kinds: dict[tuple[int, ...], FailureKind] = {}
        self.known_causes = tuple(known_causes)
        self._cause_model: CauseModel | None = None
        self._pwrong_cache: dict[tuple[int, ...], float] = {}
        self.repaired = 0
        self.projected = 0
        self.mirror = mirror
        self.mirrors = 0
        self.choices = ChoiceEffects(space, compose=compose)

    @property
    def seen(self) -> set[tuple[int, ...]]:
        return self.sampler.seen

    @property
    def exhausted(self) -> bool:
        return self.space.enumerable and len(self.seen) >= self.space.size

    def best(self) -> tuple[tuple[int, ...], float] | None:
        ok = [(i, v) for i, v in self.results.items() if v is not None]
        return min(ok, key=lambda t: t[1]) if ok else None

    def ask(self) -> tuple[int, ...] | None:
        """A config nobody has proposed: a local move when there is an incumbent, else the sampler's choice."""
        if self.exhausted:
            return None
        source = self._source()
        idx = self._local_move() if source == WALK else self._explore() if source == EXPLORE else None
        if idx is None:
            if source == WALK:  # nothing in reach worth running: the sampler stands in, for no credit
                source = None
            idx = self.sampler.ask()
            for _ in range(_TWIN_RETRIES):  # the same kernel as a config already proposed: ask again
                if idx is None or not self._twin(idx):
                    break
                self.sampler.withdraw(idx)
                idx = self.sampler.ask()
            if idx is not None:
                idx = self._onto_best_path(self._avoid_wrong(idx))
        elif source == EXPLORE:  # the explorer's: the sampler learns from it as from a local move
            idx = self._onto_best_path(self._avoid_wrong(idx))
            self.sampler.enqueue(idx)
        else:
            self.sampler.enqueue(idx)
            self.local_moves += 1
        if idx is not None:
            self.pending.add(idx)
            if source is not None:
                self._source_of[idx] = source
        return idx

    def _source(self) -> str | None:
        """Who proposes next: None (the sampler) for the start, then the walk. While nothing has failed, where the
        knowledge base said nothing of the space (no unsafe value, no parameters that grow together), the walk or
        the explorer, chosen by what has improved the incumbent on this task (``sources``); where it did, every
        ``explore_every``-th proposal the sampler's (0: the walk alone everywhere)."""
        asked = len(self.results) + len(self.pending)
        if asked < self.n_start or self.best() is None:
            return None
        if self._failures() or not self.explore_every:
            return WALK
        if self.explorer and not (self.known_causes or self.together):
            return self.sources.select()
        return None if asked % self.explore_every == 0 else WALK

    def _explore(self) -> tuple[int, ...] | None:
        """The explorer's proposal: its sampler seeded afresh for each proposal over every result so far (what a
        study built now and told them all would propose; ``OptunaTuner.start_round``), asked once; where the
        explorer is the tuner's own kind of sampler, that one's (asked by ``ask``)."""
        if self._own_explorer:
            return None
        if self._explorer is None:  # told every result from here on, as it comes (``tell``)
            self._explorer = OptunaTuner(space=self.space, sampler=self.explorer, seed=self._explorer_seed,
                                         n_startup_trials=max(self.n_start, 1) if self.explorer in ("tpe", "gp")
                                         else None)
            for idx, ms in self.results.items():
                self._explorer.tell(idx, ms, penalize=self.kinds.get(idx) is not FailureKind.PROPERTY)
        explorer = self._explorer
        explorer.start_round(seed=self._explorer_seed + self.explored, seen=set(self.results),
                             running=self.seen - self.results.keys())
        self.explored += 1
        kernels = self._proposed_kernels()
        try:
            for _ in range(_TWIN_RETRIES + 1):
                idx = explorer.ask()
                if idx is None or not self._twin(idx, kernels):
                    return idx
            return None
        finally:
            explorer.end_round()

    def mark(self, idx: Sequence[int]) -> None:
        """Treat ``idx`` as proposed (it is being evaluated elsewhere) so it is never proposed again."""
        idx = tuple(idx)
        if idx not in self.seen:
            self.sampler.enqueue(idx)
            self.pending.add(idx)

    def tell(self, idx: Sequence[int], runtime_ms: float | None, *, failure: FailureKind | None = None) -> None:
        """``runtime_ms`` of a correct run; for a failure None, and its kind (a resource failure by default); a
        config the knowledge base refused (``FailureKind.REFUSED``) is only marked as seen."""
        idx = tuple(idx)
        self.pending.discard(idx)
        if idx in self.results or idx in self.refused:
            return
        if failure is FailureKind.REFUSED:  # the knowledge base excluded it: never proposed again, nothing learned
            self.refused.add(idx)
            self.sampler.tell(idx, None, penalize=False)
            return
        before = self.best()
        self.results[idx] = runtime_ms
        improved = runtime_ms is not None and (before is None or runtime_ms < before[1])
        if improved:
            self._since_improvement = 0
        else:
            self._since_improvement += 1
        if (source := self._source_of.pop(idx, None)) is not None:
            self.sources.update(source, improved)
        if runtime_ms is None:
            self.kinds[idx] = failure or FailureKind.RESOURCE
        else:
            self.choices.observe(idx, runtime_ms, self.results)
        wrong = self.kinds.get(idx) is FailureKind.PROPERTY
        self.sampler.tell(idx, runtime_ms, penalize=not wrong)
        if self._explorer is not None:
            self._explorer.tell(idx, runtime_ms, penalize=not wrong)
        self._failure_model = None
        self._pfail_cache = {}
        self._cause_model = None
        self._pwrong_cache = {}

    def _twin(self, idx: tuple[int, ...], proposed: set[tuple[int, ...]] | None = None) -> bool:
        """Whether ``idx`` differs from a config already proposed only in choices seen to be inert there."""
        if not self.choices.any_inert:
            return False
        if proposed is None:
            proposed = self._proposed_kernels()
        return self.choices.canonical(idx) in proposed

    def _proposed_kernels(self) -> set[tuple[int, ...]]:
        return {self.choices.canonical(m) for m in self.seen}

    def _wrong_limit(self, anchor: tuple[int, ...], n: tuple[int, ...]) -> float:
        """How likely incorrect a neighbour may be and still be proposed: a choice flipped alone at the anchor's
        tiles is the experiment that settles a suspected cause, so it may go up to ``probe_threshold``."""
        flipped = [d for d in range(self.space.dims) if n[d] != anchor[d]]
        if len(flipped) == 1 and not self.space.ordinal[flipped[0]]:
            return max(self.wrong_threshold, self.probe_threshold)
        return self.wrong_threshold

    def _worth_flipping(self, anchor: tuple[int, ...], n: tuple[int, ...]) -> bool:
        """A move onto another categorical path: not onto one seen to cost time from the anchor's; with a tile
        change too, only onto one whose effect alone is known (timed and not slower, or out of resources at the
        anchor's tiles)."""
        space = self.space
        if all(space.ordinal[d] or n[d] == anchor[d] for d in range(space.dims)):
            return True
        verdict = self._cost_here(anchor, n) if self.local_cost else None
        if verdict is None:
            verdict = self.choices.costs(anchor, n)
        if verdict:
            return False
        if verdict is None and any(space.ordinal[d] and n[d] != anchor[d] for d in range(space.dims)):
            alone = tuple(n[d] if not space.ordinal[d] else anchor[d] for d in range(space.dims))
            return self.kinds.get(alone) is FailureKind.RESOURCE
        return True

    def _failures(self) -> bool:
        """Whether any config failed or was refused: the landscape has structure (a size limit, a choice that
        computes the wrong answer) for the walk to follow, and the sampler's interleaved proposals, meant for a
        flat landscape where a walk is weak, take its evaluations."""
        return bool(self.kinds or self.refused)

    def _resource_failures(self) -> bool:
        return any(k is FailureKind.RESOURCE for k in self.kinds.values())

    # --- what makes a config incorrect ---------------------------------------------------------------------
    def _causes(self) -> CauseModel:
        if self._cause_model is None:
            wrong = [i for i, k in self.kinds.items() if k is FailureKind.PROPERTY]
            right = [i for i, v in self.results.items() if v is not None]
            self._cause_model = CauseModel(self.space, known=self.known_causes).fit(wrong, right)
        return self._cause_model

    def _pwrong(self, idx: tuple[int, ...]) -> float:
        if idx not in self._pwrong_cache:
            if idx in self.results:
                self._pwrong_cache[idx] = float(self.kinds.get(idx) is FailureKind.PROPERTY)
            else:
                self._pwrong_cache[idx] = self._causes().predict(idx)
        return self._pwrong_cache[idx]

    def _avoid_wrong(self, idx: tuple[int, ...]) -> tuple[int, ...]:
        """The sampler's proposal, or, when it likely computes the wrong answer, the nearest config predicted
        correct that keeps as many of its ordinal values (the tiles the sampler chose) as possible.

        A proposal is replaced with the probability that it is incorrect, so a cause that is only suspected (one
        incorrect config cannot tell which of its values is to blame) is still put to the test now and then.
        """
        if not self._causes().active or self._rng.random() >= self._pwrong(idx):
            return idx
        kernels = self._proposed_kernels()
        pool = [n for n in self.space.neighbours(idx) + self.space.neighbours2(idx)
                if n not in self.seen and not self._twin(n, kernels) and self._pwrong(n) < self.wrong_threshold]
        if not pool:
            return idx
        repair = self._in_place_of(idx, pool)
        self.repaired += 1
        return repair

    def _onto_best_path(self, idx: tuple[int, ...]) -> tuple[int, ...]:
        """The sampler's proposal, or, when its categorical path was timed slower than the incumbent's at equal
        tiles, its tiles on the incumbent's path (the nearest unseen such config, within two steps of them where
        there is one): a path that costs a stated factor everywhere teaches nothing about tiles that the incumbent's
        path does not teach faster."""
        best = self.best()
        if best is None or not self.choices.costs(best[0], idx):
            return idx
        space = self.space
        target = tuple(best[0][d] if not space.ordinal[d] else idx[d] for d in range(space.dims))
        kernels = self._proposed_kernels()

        def worth(n: tuple[int, ...]) -> bool:
            return (all(space.ordinal[d] or n[d] == target[d] for d in range(space.dims)) and n not in self.seen
                    and not self._twin(n, kernels) and self._pfail(n) < self.fail_threshold)

        pool = [n for n in [target, *space.neighbours(target), *space.neighbours2(target)] if worth(n)]
        if not pool and space.enumerable:  # the tiles' two-step reach on that path is used up: any tiles on it
            pool = [n for n in space.all_indices() if worth(n)]
        if not pool:
            return idx
        onto = self._in_place_of(idx, pool)
        self.projected += 1
        return onto

    def _in_place_of(self, idx: tuple[int, ...], pool: list[tuple[int, ...]]) -> tuple[int, ...]:
        """The member of ``pool`` fewest ordinal moves from the sampler's proposal ``idx`` (ties at random), put in
        the sampler's queue in its place."""
        space = self.space
        moved = [sum(n[d] != idx[d] for d in range(space.dims) if space.ordinal[d]) for n in pool]
        nearest = [n for n, m in zip(pool, moved, strict=True) if m == min(moved)]
        chosen = nearest[int(self._rng.integers(len(nearest)))]
        self.sampler.withdraw(idx)
        self.sampler.enqueue(chosen)
        return chosen

    # --- local search --------------------------------------------------------------------------------------
    def _fail_model(self) -> FailureModel:
        """Resource failures against everything that ran (an incorrect config ran: it fits)."""
        if self._failure_model is None:
            xs = list(self.results)
            # A choice seen to change the time by more than ``own_path_factor`` at equal tiles changes the work a
            # tile does (a split into three products instead of two, fp8 operands): a failure on one of its
            # values is certain only on that value's path, not on the others (``FailureModel(own_path=...)``).
            own = self.choices.work_changing(self.own_path_factor) if self.own_path_factor else set()
            self._failure_model = FailureModel(self.space, own_path=own).fit(
                xs, [self.kinds.get(x) is FailureKind.RESOURCE for x in xs])
        return self._failure_model

    def _pfail(self, idx: tuple[int, ...]) -> float:
        if idx not in self._pfail_cache:
            if idx in self.results:
                self._pfail_cache[idx] = float(self.kinds.get(idx) is FailureKind.RESOURCE)
            else:
                self._pfail_cache[idx] = self._fail_model().predict(idx)
        return self._pfail_cache[idx]

    def _pool(self, anchor: tuple[int, ...], kernels: set[tuple[int, ...]], *,
              prefer_boundary: bool = True) -> list[tuple[int, ...]]:
        """The neighbours of ``anchor`` worth running (within two steps, not seen, predicted to fit and be correct);
        next to the learned resource boundary only, where there are such."""
        pool = [n for n in self._reach(anchor)
                if n not in self.seen and not self._twin(n, kernels) and self._worth_flipping(anchor, n)]
        wrong = self._causes().active
        pool = [n for n in pool if self._pfail(n) < self.fail_threshold
                and (not wrong or self._pwrong(n) < self._wrong_limit(anchor, n))]
        if prefer_boundary and self.boundary and self._resource_failures():
            near = [n for n in pool if max((self._pfail(m) for m in self.space.neighbours(n)), default=0.0)
                    >= self.boundary_threshold]
            pool = near or pool
        return pool

    def _local_move(self) -> tuple[int, ...] | None:
        ranked = sorted((v, i) for i, v in self.results.items() if v is not None)
        kernels = self._proposed_kernels()
        stuck = (self.patience and self._since_improvement >= self.patience
                 and self._settled(ranked[0][1], kernels))
        if stuck:
            self._stuck_moves += 1
            if self._stuck_moves % self.escape_every == 0:
                idx = self._escape(ranked, kernels)
                if idx is not None:
                    return idx
        if self.transfer:
            idx = self._transfer(ranked, kernels)
            if idx is not None:
                return idx
        if self.mirror:
            idx = self._mirror(ranked[0][1], kernels)
            if idx is not None:
                return idx
        if self.probe_untried and self._since_improvement >= self.probe_after:
            idx = self._probe(ranked[0][1], kernels)
            if idx is not None:
                return idx
        if stuck and self.ties:
            # A config within ``ties`` of the stuck incumbent is as good an anchor: walk their neighbourhoods
            # together (on the H200 fp8-operand GEMM the incumbent 256x128x64 at 1.051x has its transpose
            # 128x256x64 at 1.062x, whose two-step neighbourhood holds the best, 128x256x32: 0.75 -> 0.92 at 30).
            tied = [i for v, i in ranked if v <= ranked[0][0] * (1.0 + self.ties)]
            if len(tied) > 1:
                pool = list(dict.fromkeys(n for anchor in tied for n in self._pool(anchor, kernels)))
                if pool:
                    return pool[int(self._rng.integers(len(pool)))]
        for _, anchor in ranked[:self.anchors]:
            pool = self._pool(anchor, kernels)
            if pool:
                return pool[int(self._rng.integers(len(pool)))]
        return None

    def _transfer(self, ranked: list[tuple[float, tuple[int, ...]]],
                  kernels: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The config predicted fastest of those that pair tiles timed on one categorical path with another path
        seen to change the time at equal tiles by more than ``own_path_factor`` (time on the first path times the
        ratio of the two), when that prediction beats the incumbent: the fastest tiles found on a path that does
        other work are worth their time on the faster path, and a walk on a slower path moves to a faster one
        with its tiles rather than waiting to be pulled there by a move that happens to flip the choice."""
        space = self.space
        paths: dict[tuple[int, ...], tuple[int, ...]] = {}
        for _, i in ranked:
            paths.setdefault(self.choices.path(i), i)
        wrong = self._causes().active
        best_ms, factor = ranked[0][0], np.log(self.own_path_factor)
        predicted = []
        for ms, timed in ranked:
            for other in paths.values():
                ratio = self.choices.ratio(timed, other)
                if ratio is None or abs(ratio) <= factor or ms * np.exp(ratio) >= best_ms:
                    continue
                n = tuple(timed[d] if space.ordinal[d] else other[d] for d in range(space.dims))
                if (n not in self.seen and not self._twin(n, kernels) and self._pfail(n) < self.fail_threshold
                        and (not wrong or self._pwrong(n) < self.wrong_threshold)):
                    predicted.append((ms * float(np.exp(ratio)), n))
        if not predicted:
            return None
        self.transfers += 1
        return min(predicted)[1]

    def _mirror(self, anchor: tuple[int, ...], kernels: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The tiles of a config timed on another categorical path, on ``anchor``'s path: the pair tells what that
        path costs against the anchor's (``choices``) for an evaluation spent on the anchor's path, where a flip at
        the anchor's tiles would spend one on the other path. Mirrors of the fastest such configs first."""
        space = self.space
        timed = sorted((v, i) for i, v in self.results.items() if v is not None)
        for _, other in timed:
            if self.choices.costs(anchor, other) is not None:
                continue
            m = tuple(other[d] if space.ordinal[d] else anchor[d] for d in range(space.dims))
            if (m not in self.seen and not self._twin(m, kernels) and self._pfail(m) < self.fail_threshold
                    and self._pwrong(m) < self.wrong_threshold):
                self.mirrors += 1
                return m
        return None

    def _cost_here(self, anchor: tuple[int, ...], n: tuple[int, ...]) -> bool | None:
        """Whether ``n``'s categorical path was timed slower than ``anchor``'s at the anchor's own tiles (None: not
        timed there). Where a path's cost moves with the tiles, the pair at the anchor's tiles is the evidence that
        counts for a move from it, whatever the pairs elsewhere say."""
        space = self.space
        here = tuple(anchor[d] if space.ordinal[d] else n[d] for d in range(space.dims))
        there, base = self.results.get(here), self.results.get(anchor)
        if here == anchor or there is None or base is None:
            return None
        return there > base * (1.0 + self.choices.margin)

    def _probe(self, anchor: tuple[int, ...], kernels: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """A categorical value no config has run with yet, flipped alone at the incumbent's tiles: a path never
        timed is never weighed by ``mirror`` or ``transfer``, and in the walk's draw it is one neighbour of
        dozens (on L2/1's convolution, recorded on an H100, CMA-ES's five starting configs missed the rounded-TF32
        path in some seeds, whose best is 1.18x faster than the bf16 split's best, and a walk on the bf16 split
        first ran it after 26 evaluations)."""
        space = self.space
        for d in range(space.dims):
            if space.ordinal[d]:
                continue
            ran = {i[d] for i in self.results}
            for v in self._rng.permutation(space.sizes[d]):
                if v == anchor[d] or v in ran:
                    continue
                n = (*anchor[:d], int(v), *anchor[d + 1:])
                if (n not in self.seen and not self._twin(n, kernels) and self._pfail(n) < self.fail_threshold
                        and self._pwrong(n) < self._wrong_limit(anchor, n)):
                    self.probes += 1
                    return n
        return None

    def _reach(self, idx: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The configs within the walk's two steps of ``idx``: one or two dimensions moved one step each, where a
        group of dimensions that grow together (``moves_together``: a tile dimension and the warps that hold its
        accumulator) grown by one step each counts as one step. Computed once per config (the walk asks for the
        incumbent's reach on every move; the caller must not change the list)."""
        if idx in self._reach_cache:
            return self._reach_cache[idx]
        space = self.space
        out = space.neighbours(idx) + space.neighbours2(idx)
        for group in self.together:
            if any(idx[d] + 1 >= space.sizes[d] for d in group):
                continue
            grown = list(idx)
            for d in group:
                grown[d] += 1
            out.append(tuple(grown))
            for d in range(space.dims):
                if d in group:
                    continue
                for j in space.steps(grown, d):
                    out.append((*grown[:d], j, *grown[d + 1:]))
        self._reach_cache[idx] = list(dict.fromkeys(out)) if self.together else out
        return self._reach_cache[idx]

    def _settled(self, best: tuple[int, ...], kernels: set[tuple[int, ...]]) -> bool:
        """Whether the walk has run at least a share ``settled`` of the incumbent's neighbourhood (those run and
        those still worth running) without finding better: then it is likely a local optimum, not an unlucky walk."""
        near = self._reach(best)
        ran = sum(n in self.results for n in near)
        return ran >= self.settled * (ran + len(self._pool(best, kernels, prefer_boundary=False)))

    def _escape(self, ranked: list[tuple[float, tuple[int, ...]]],
                kernels: set[tuple[int, ...]]) -> tuple[int, ...] | None:
        """A move out of the incumbent's basin: the walk from one of the next best configs (found around the
        incumbent, so within two steps of it) to a config beyond the incumbent's own two-step reach."""
        best = ranked[0][1]
        near = set(self._reach(best))
        anchors = [i for _, i in ranked[1:1 + self.escape_anchors]]
        for k in self._rng.permutation(len(anchors)):
            pool = [n for n in self._pool(anchors[k], kernels) if n not in near]
            if pool:
                self.escapes += 1
                return pool[int(self._rng.integers(len(pool)))]
        return None


def known_causes(space: ParamSpace, unsafe: Sequence[Mapping[str, Any]]) -> list[tuple[Literal, ...]]:
    """{param: value} conjunctions as grid literals of ``space``; one naming a value the space lacks is dropped."""
    out = []
    for entry in unsafe:
        lits = []
        for name, value in entry.items():
            if name not in space.names:
                break
            d = space.names.index(name)
            idx = space.indices_of({**space.params_of([0] * space.dims), name: value})
            if idx is None:
                break
            lits.append((d, idx[d]))
        else:
            out.append(tuple(lits))
    return out
