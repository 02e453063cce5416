"""Steady-state, asynchronous evolution on islands.

``ask`` works whenever it is called and ``tell`` takes results in any order: there are no generations to wait
for. Each island keeps its best few (elites) and replaces its worst, preferring to drop an individual that
nearly duplicates a better one of the same structure, so an island does not collapse onto one config; every
``migration_interval`` results each island sends its best to the next. Parents are drawn by tournament among
correct individuals; a failed child can be sent back to ``llm-repair`` when that operator is available. The
operator of each proposal is chosen by an AUC bandit credited when a child beats its parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from evoforge.mutators.names import CROSSOVER, LLM_REPAIR, PARAMS
from evoforge.search.base import Proposal, is_repeat
from evoforge.search.strategies.names import EVOLUTION
from evoforge.search.strategies.proposals import params_proposal, runtime_of
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.bandit import AUCBandit

from evoforge.core import Candidate, EvalResult

_MUTATION_TRIES = 30
_COLLAPSED = 0.1  # mean parameter distance within an island below which it receives a random immigrant


@dataclass
class Individual:
    candidate: Candidate
    result: EvalResult
    island: int
    #: (structure id, grid point) once asked: an island's trim compares every pair, a resume trims 100k times
    place: tuple[str, tuple[int, ...] | None] | None = field(default=None, compare=False, repr=False)

    @property
    def runtime_ms(self) -> float | None:
        return runtime_of(self.result)

    @property
    def ok(self) -> bool:
        return self.runtime_ms is not None


class EvolutionStrategy:
    name = EVOLUTION

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (),
                 operators: Sequence[str] = (PARAMS, CROSSOVER), islands: int = 2, island_size: int = 8,
                 elites: int = 2, tournament_size: int = 3, migration_interval: int = 10,
                 init_random: int | None = None, repair_attempts: int = 1, bandit_window: int = 100,
                 bandit_exploration: float = 0.5) -> None:
        self.initial = tuple(initial)
        if islands < 1 or island_size < 2:
            raise ValueError("islands >= 1 and island_size >= 2 are needed")
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.operators = tuple(dict.fromkeys(operators)) or (PARAMS,)
        self.bandit = AUCBandit(self.operators, seed=seed, window=bandit_window, exploration=bandit_exploration)
        self.islands: list[list[Individual]] = [[] for _ in range(islands)]
        self.island_size = island_size
        self.elites = elites
        self.tournament_size = tournament_size
        self.migration_interval = migration_interval
        self.init_random = island_size * islands // 2 if init_random is None else init_random
        self.repair_attempts = repair_attempts
        self.by_id: dict[str, Individual] = {}
        self.failures: list[Individual] = []
        self.repairs: dict[str, int] = {}
        self.spaces: dict[str, ParamSpace] = {}
        self.bases: dict[str, Candidate] = {}
        self._seen: dict[str, set[tuple[int, ...]]] = {}
        self._pending_seeds = list(self.initial)
        self._asked = 0
        self._told = 0
        self._owed = 0  # proposals told as repeats of an evaluated config, each owed a config nobody has proposed
        self._next_island = 0
        for cand in self.initial:
            self._register_structure(cand)

    # --- bookkeeping ---------------------------------------------------------------------------------------
    @property
    def seed_structure(self) -> str | None:
        """The first structure seen (the first seed, or the first candidate told)."""
        return next(iter(self.spaces), None)

    def _register_structure(self, cand: Candidate) -> None:
        sid = cand.structure_id
        if sid not in self.spaces:
            self.spaces[sid] = ParamSpace.from_dict(cand.space)
            self.bases[sid] = cand
            self._seen[sid] = set()

    def _config_seen(self, sid: str, idx: tuple[int, ...]) -> bool:
        return idx in self._seen[sid]

    def _mark(self, sid: str, idx: tuple[int, ...]) -> None:
        self._seen[sid].add(idx)

    def _space_left(self, sid: str) -> bool:
        space = self.spaces[sid]
        return space.dims > 0 and (not space.enumerable or len(self._seen[sid]) < space.size)

    def population(self) -> list[Individual]:
        return [ind for island in self.islands for ind in island]

    def best(self) -> Individual | None:
        pop = self.population()
        return min(pop, key=lambda i: i.runtime_ms) if pop else None

    def diversity(self, island: int | None = None) -> dict[str, float]:
        """Distinct structures and the mean parameter distance between members sharing a structure."""
        pop = self.population() if island is None else self.islands[island]
        dists = []
        for i, a in enumerate(pop):
            for b in pop[i + 1:]:
                sid = a.candidate.structure_id
                if sid == b.candidate.structure_id and self.spaces[sid].dims:
                    ia = self.spaces[sid].indices_of(a.candidate.params)
                    ib = self.spaces[sid].indices_of(b.candidate.params)
                    if ia is not None and ib is not None:
                        dists.append(self.spaces[sid].distance(ia, ib))
        return {"structures": float(len({i.candidate.structure_id for i in pop})),
                "mean_param_distance": float(np.mean(dists)) if dists else 1.0, "size": float(len(pop))}

    # --- ask -----------------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Proposal]:
        out = []
        for _ in range(max(n, 0)):
            proposal = self._propose_one()
            if proposal is None:
                break
            self._asked += 1
            out.append(proposal)
        return out

    def _propose_one(self) -> Proposal | None:
        seed_sid = self.seed_structure
        if seed_sid is None:
            return None  # nothing to start from until a seed is given or told
        if self._owed and PARAMS in self.operators:
            # a proposal came to nothing new (its child repeated an evaluated config): a config nobody has proposed
            # takes its place, so operators that keep landing on evaluated neighbours cannot starve the budget
            proposal = self._fill_in()
            self._owed -= 1
            if proposal is not None:
                return proposal
        if PARAMS in self.operators and self._asked < self.init_random and self._space_left(seed_sid):
            return self._random_immigrant(seed_sid)
        applicable = [op for op in self.operators if self._applicable(op)]
        if not applicable:
            return self._fallback()
        op = self.bandit.select(applicable)
        island = self._next_island
        self._next_island = (self._next_island + 1) % len(self.islands)
        proposal = self._build(op, island)
        return proposal if proposal is not None else self._fallback()

    def _fill_in(self) -> Proposal | None:
        """A config nobody has proposed, near the best individual where its structure has any left."""
        best = self.best()
        proposal = self._propose_params(best, best.island) if best is not None else None
        if proposal is None:
            sids = [s for s in self.spaces if self._space_left(s)]
            proposal = self._random_immigrant(sids[0]) if sids else None
        return proposal

    def _fallback(self) -> Proposal | None:
        """Nothing applicable yet (nothing evaluated): evaluate a seed as it is, or a random config."""
        while self._pending_seeds:
            cand = self._pending_seeds.pop(0)
            space = self.spaces[cand.structure_id]
            idx = space.indices_of(cand.params)
            if idx is None or not self._config_seen(cand.structure_id, idx):
                if idx is not None:
                    self._mark(cand.structure_id, idx)
                return Proposal(operator=PARAMS, parents=(cand,), params=dict(cand.params), meta={"seed": True})
        if PARAMS in self.operators:
            for sid in self.spaces:
                if self._space_left(sid):
                    return self._random_immigrant(sid)
        return None

    def _correct(self, island: int | None = None) -> list[Individual]:
        pop = self.population() if island is None else self.islands[island]
        return [i for i in pop if i.ok]

    def _applicable(self, op: str) -> bool:
        correct = self._correct()
        if op == PARAMS:
            return any(self._space_left(i.candidate.structure_id) for i in correct)
        if op == CROSSOVER:
            return len(correct) >= 2
        if op == LLM_REPAIR:
            return self._repairable() is not None
        return bool(correct)

    def _repairable(self) -> Individual | None:
        for ind in reversed(self.failures):
            if self.repairs.get(ind.candidate.id, 0) < self.repair_attempts:
                return ind
        return None

    def _tournament(self, island: int, *, exclude: str = "") -> Individual | None:
        pool = [i for i in self._correct(island) if i.candidate.id != exclude] \
            or [i for i in self._correct() if i.candidate.id != exclude]
        if not pool:
            return None
        k = min(self.tournament_size, len(pool))
        picks = self._rng.choice(len(pool), size=k, replace=False)
        return min((pool[int(j)] for j in picks), key=lambda i: i.runtime_ms)

    def _build(self, op: str, island: int) -> Proposal | None:
        if op == LLM_REPAIR:
            ind = self._repairable()
            if ind is None:
                return None
            self.repairs[ind.candidate.id] = self.repairs.get(ind.candidate.id, 0) + 1
            return Proposal(operator=LLM_REPAIR, parents=(ind.candidate,),
                            meta={"status": str(ind.result.status), "message": ind.result.message})
        parent = self._tournament(island)
        if parent is None:
            return None
        if op == PARAMS:
            return self._propose_params(parent, island)
        if op == CROSSOVER:
            other = self._tournament(island, exclude=parent.candidate.id)
            if other is None:
                return None
            sid = parent.candidate.structure_id
            if other.candidate.structure_id != sid:  # two structures: a mutator merges the sources
                return Proposal(operator=CROSSOVER, parents=(parent.candidate, other.candidate))
            # one structure: crossing means mixing parameter values, which needs no mutator
            idx = self._crossover_params(parent, other) if self._space_left(sid) else None
            if idx is None:
                return None
            self._mark(sid, idx)
            return params_proposal(parent.candidate, self.spaces[sid], idx, operator=CROSSOVER,
                                   parents=(parent.candidate, other.candidate))
        return Proposal(operator=op, parents=(parent.candidate,))

    # --- parameter moves -----------------------------------------------------------------------------------
    def _propose_params(self, parent: Individual, island: int) -> Proposal | None:
        sid = parent.candidate.structure_id
        if not self._space_left(sid):
            sids = [s for s in self.spaces if self._space_left(s)]
            return self._random_immigrant(sids[0]) if sids else None
        if self.diversity(island)["mean_param_distance"] < _COLLAPSED and len(self.islands[island]) >= 3:
            return self._random_immigrant(sid)
        space = self.spaces[sid]
        start = space.indices_of(parent.candidate.params)
        idx = self._mutate(sid, start) if start is not None else None
        if idx is None:
            return self._random_immigrant(sid)
        self._mark(sid, idx)
        return params_proposal(parent.candidate, space, idx)

    def _mutate(self, sid: str, start: tuple[int, ...]) -> tuple[int, ...] | None:
        space = self.spaces[sid]
        free = [d for d, n in enumerate(space.sizes) if n > 1]
        if not free:
            return None
        for _ in range(_MUTATION_TRIES):
            idx = list(start)
            k = 1 + int(self._rng.binomial(len(free) - 1, 1.0 / len(free)))
            for d in self._rng.choice(free, size=min(k, len(free)), replace=False):
                d = int(d)
                if space.ordinal[d]:
                    step = 1 if self._rng.random() < 0.75 else 2
                    idx[d] = int(np.clip(idx[d] + step * self._rng.choice((-1, 1)), 0, space.sizes[d] - 1))
                else:
                    idx[d] = int(self._rng.choice([j for j in range(space.sizes[d]) if j != idx[d]]))
            t = tuple(idx)
            if t != tuple(start) and not self._config_seen(sid, t):
                return t
        return self._nearest_unseen(sid, start)

    def _crossover_params(self, a: Individual, b: Individual) -> tuple[int, ...] | None:
        sid = a.candidate.structure_id
        space = self.spaces[sid]
        ia, ib = space.indices_of(a.candidate.params), space.indices_of(b.candidate.params)
        if ia is None or ib is None:
            return None
        for _ in range(_MUTATION_TRIES):
            child = tuple(x if self._rng.random() < 0.5 else y for x, y in zip(ia, ib, strict=True))
            if not self._config_seen(sid, child):
                return child
        return self._mutate(sid, ia)

    def _nearest_unseen(self, sid: str, start: tuple[int, ...]) -> tuple[int, ...] | None:
        space = self.spaces[sid]
        if space.enumerable:
            pool = [p for p in space.all_indices() if not self._config_seen(sid, p)]
        else:
            pool = [p for p in (space.random_indices(self._rng) for _ in range(256)) if not self._config_seen(sid, p)]
        if not pool:
            return None
        d = np.array([space.distance(start, p) for p in pool]) + 1e-9 * self._rng.random(len(pool))
        return pool[int(np.argmin(d))]

    def _random_immigrant(self, sid: str) -> Proposal | None:
        space = self.spaces[sid]
        idx = None
        for _ in range(_MUTATION_TRIES):
            t = space.random_indices(self._rng)
            if not self._config_seen(sid, t):
                idx = t
                break
        if idx is None:
            idx = self._nearest_unseen(sid, space.random_indices(self._rng))
        if idx is None:
            return None
        self._mark(sid, idx)
        best = min((i for i in self._correct() if i.candidate.structure_id == sid),
                   key=lambda i: i.runtime_ms, default=None)
        return params_proposal(best.candidate if best else self.bases[sid], space, idx, immigrant=True)

    # --- tell ----------------------------------------------------------------------------------------------
    def tell(self, candidate: Candidate, result: EvalResult) -> None:
        self._told += 1
        self._register_structure(candidate)
        sid = candidate.structure_id
        idx = self.spaces[sid].indices_of(candidate.params) if self.spaces[sid].dims else None
        if idx is not None:
            self._mark(sid, idx)
        parent = self.by_id.get(candidate.parents[0]) if candidate.parents else None
        island = parent.island if parent is not None else self._told % len(self.islands)
        ind = Individual(candidate, result, island)
        if is_repeat(result):
            self._owed += 1
        if candidate.operator in self.bandit.arms:  # a repeat taught nothing: no credit to the operator
            better = ind.ok and not is_repeat(result) and (parent is None or not parent.ok
                                                            or ind.runtime_ms < parent.runtime_ms)
            self.bandit.update(candidate.operator, better)
        if candidate.id in self.by_id:  # told twice: keep the first, never count an individual twice
            return
        self.by_id[candidate.id] = ind
        self._after_tell(ind, idx)
        if ind.ok:
            self.islands[island].append(ind)
            self._trim(island)
        else:
            self.failures.append(ind)
        if self._told % self.migration_interval == 0 and len(self.islands) > 1:
            self._migrate()

    def _after_tell(self, ind: Individual, idx: tuple[int, ...] | None) -> None:
        """Hook for subclasses that keep their own per-structure models."""

    def _trim(self, island: int) -> None:
        members = self.islands[island]
        while len(members) > self.island_size:
            ranked = sorted(members, key=lambda i: i.runtime_ms)
            keep = {id(i) for i in ranked[:self.elites]}
            n = len(ranked)
            crowded = self._crowded(ranked)
            scores = [(rank / n + (0.5 if crowded[rank] else 0.0), rank, ind)
                      for rank, ind in enumerate(ranked) if id(ind) not in keep]
            _, _, victim = max(scores, key=lambda t: (t[0], t[1]))
            members.remove(victim)

    def _crowded(self, ranked: list[Individual]) -> list[bool]:
        """Per member (best first), whether it nearly duplicates a better one (``_near_duplicate``): the distances
        of each structure's members at once, as ``ParamSpace.distance`` sums them (dimension by dimension, so
        the same floats), where a pair at a time was 22 Python calls per result told."""
        out = [False] * len(ranked)
        groups: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for rank, ind in enumerate(ranked):
            sid, idx = self._place(ind)
            if idx is not None:
                groups.setdefault(sid, []).append((rank, idx))
        for sid, members in groups.items():
            if len(members) < 2:
                continue
            space = self.spaces[sid]
            if not space.names:
                near = np.ones((len(members), len(members)), dtype=bool)
            else:
                grid = np.array([idx for _, idx in members], dtype=np.int64)
                total = np.zeros((len(members), len(members)))
                for d, gaps in enumerate(space.index_gaps):
                    col = grid[:, d]
                    if gaps is None:
                        total += (col[:, None] != col[None, :]).astype(float)
                    elif gaps:
                        total += np.abs(col[:, None] - col[None, :]) / gaps
                near = total / len(space.names) < 0.15
            for a in range(1, len(members)):
                if near[a, :a].any():
                    out[members[a][0]] = True
        return out

    def _near_duplicate(self, a: Individual, b: Individual) -> bool:
        (sid, ia), (other, ib) = self._place(a), self._place(b)
        return sid == other and ia is not None and ib is not None and self.spaces[sid].distance(ia, ib) < 0.15

    def _place(self, ind: Individual) -> tuple[str, tuple[int, ...] | None]:
        if ind.place is None:
            sid = ind.candidate.structure_id
            ind.place = (sid, self.spaces[sid].indices_of(ind.candidate.params))
        return ind.place

    def _migrate(self) -> None:
        bests = [min(isl, key=lambda i: i.runtime_ms) if isl else None for isl in self.islands]
        for k, best in enumerate(bests):
            if best is None:
                continue
            dest = (k + 1) % len(self.islands)
            if all(i.candidate.id != best.candidate.id for i in self.islands[dest]):
                self.islands[dest].append(Individual(best.candidate, best.result, dest))
                self._trim(dest)
