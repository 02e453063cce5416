"""Many trials of an Optuna record read at once: one query per table, only the attributes asked for.

Optuna's ``get_trials`` builds a ``FrozenTrial`` per trial with every parameter, value and attribute decoded; a
resume or a report that wants a handful of attributes of each of 100,000 trials paid for all of them (a 10k-trial
record took 71 s to resume, 36 s to report; experiments/results/scale/). ``RecordStorage.record_trial`` writes a
trial's rows in one transaction of bulk inserts; ``read_trials`` reads them back the same way: the trials, their
values, the user attributes and the system attributes, each one ``SELECT`` over every study asked for, filtered
by key in SQL, so the rows read grow with the trials times the keys asked, not with everything recorded. The
schema is Optuna's own (``optuna.storages._rdb.models``): the record stays readable by Optuna's tools.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy
from optuna.trial import TrialState

FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


@dataclass
class TrialRow:
    """One trial as read here: its study, number, state and value, and the attributes that were asked for."""

    study_id: int
    trial_id: int
    number: int
    state: TrialState
    value: float | None = None
    user_attrs: dict[str, Any] = field(default_factory=dict)
    system_attrs: dict[str, Any] = field(default_factory=dict)


def _engine(storage: Any) -> sqlalchemy.engine.Engine:
    engine = getattr(storage, "engine", None)
    if engine is None:  # an RDBStorage under Optuna's cache wrapper
        engine = getattr(getattr(storage, "_backend", None), "engine", None)
    if engine is None:
        raise TypeError(f"{type(storage).__name__} is not an RDB storage: read it through Optuna's get_trials")
    return engine


def is_rdb(storage: Any) -> bool:
    try:
        _engine(storage)
    except TypeError:
        return False
    return True


def study_ids(storage: Any, names: Iterable[str]) -> dict[str, int]:
    """Study name -> id for the names the record holds (one query)."""
    from optuna.storages._rdb import models

    names = list(names)
    studies = models.StudyModel.__table__
    with _engine(storage).connect() as c:
        rows = c.execute(sqlalchemy.select(studies.c.study_name, studies.c.study_id)
                         .where(studies.c.study_name.in_(names))).all() if names else []
    return {str(name): int(sid) for name, sid in rows}


def campaign_study_ids(storage: Any, prefix: str) -> dict[str, int]:
    """Study name -> id for every study whose name starts with ``prefix`` (a campaign's ``NAME/``; one query)."""
    from optuna.storages._rdb import models

    studies = models.StudyModel.__table__
    with _engine(storage).connect() as c:
        rows = c.execute(sqlalchemy.select(studies.c.study_name, studies.c.study_id)
                         .where(studies.c.study_name.startswith(prefix, autoescape=True))).all()
    return {str(name): int(sid) for name, sid in rows}


def read_trials(storage: Any, ids: Collection[int], *, user_keys: Collection[str] | None = None,
                system_keys: Collection[str] = (), states: Collection[TrialState] = FINISHED,
                ) -> dict[int, list[TrialRow]]:
    """The trials of the studies ``ids`` in ``states``, each study's in number order: four ``SELECT``\\ s whatever
    the number of trials or studies. ``user_keys`` None reads every user attribute; a collection only those keys
    (an empty one none); ``system_keys`` likewise but never all (artifact metadata and notes live there)."""
    from optuna.storages._rdb import models

    out: dict[int, list[TrialRow]] = {int(i): [] for i in ids}
    if not out:
        return out
    trials = models.TrialModel.__table__
    chosen = (trials.c.study_id.in_(list(out)), trials.c.state.in_(list(states)))
    by_id: dict[int, TrialRow] = {}
    with _engine(storage).connect() as c:
        for trial_id, study_id, number, state in c.execute(
                sqlalchemy.select(trials.c.trial_id, trials.c.study_id, trials.c.number, trials.c.state)
                .where(*chosen).order_by(trials.c.study_id, trials.c.number)):
            row = TrialRow(study_id=int(study_id), trial_id=int(trial_id), number=int(number),
                           state=state if isinstance(state, TrialState) else TrialState[str(state)])
            by_id[row.trial_id] = row
            out[row.study_id].append(row)
        if not by_id:
            return out
        values = models.TrialValueModel.__table__
        for trial_id, value, kind in c.execute(
                sqlalchemy.select(values.c.trial_id, values.c.value, values.c.value_type)
                .join(trials, trials.c.trial_id == values.c.trial_id)
                .where(*chosen, values.c.objective == 0)):
            if trial_id in by_id:
                by_id[trial_id].value = models.TrialValueModel.stored_repr_to_value(value, kind)
        for table, keys, attr in ((models.TrialUserAttributeModel.__table__, user_keys, "user_attrs"),
                                  (models.TrialSystemAttributeModel.__table__, system_keys, "system_attrs")):
            if keys is not None and not keys:
                continue
            query = (sqlalchemy.select(table.c.trial_id, table.c.key, table.c.value_json)
                     .join(trials, trials.c.trial_id == table.c.trial_id).where(*chosen))
            if keys is not None:
                query = query.where(table.c.key.in_(list(keys)))
            for trial_id, key, value_json in c.execute(query):
                row = by_id.get(trial_id)
                if row is not None:
                    getattr(row, attr)[key] = json.loads(value_json)
    return out
