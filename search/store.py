"""The Optuna record (``OptunaStore``, the ``Store`` of search/base.py): one study per (campaign, task), one
finished trial per evaluated candidate.

Trials are written finished in one step (``create_new_trial`` with a complete template: value, parameters,
attributes, artifacts and the evaluation's own start and end), never left RUNNING: a kill -9 loses only what
was in flight. Candidates are written to ``RUN_DIR/candidates`` before their trial, so a trial always has its
candidate; sources, prompts and replies are also Optuna artifacts for the dashboard.

The record is read by Optuna's own tools (importance, slice and timeline plots, ``trials_dataframe``,
optuna-dashboard), so it says what the search did in their terms: a ``SPACE`` choice list is a
``CategoricalDistribution`` (not an integer range the plots would treat as continuous), a trial starts when its
evaluation was handed to an evaluator and ends when the result came back, and an artifact's id is its content's
hash, so a thousand parameter moves of one structure share one ``source.py`` (one ``system_attrs`` column of
``trials_dataframe``, not a thousand).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import mimetypes
import time
import uuid
import warnings
from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from evoforge.search.base import StoredTrial
from evoforge.search.durable import DiskFull, atomic_write, disk_full_error, no_space_left
from optuna.artifacts import FileSystemArtifactStore
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError, json_safe

MESSAGE_LIMIT = 4000
RESULT_ATTR = "evoforge:result"  # system attribute: the EvalResult as JSON
LINEAGE_KEYS = ("candidate_id", "operator", "stage", "parents")  # what a trial's candidate is read back with


_PLAIN = (bool, int, float, str, type(None))


def _distribution(name: str, value: Any, space: dict[str, list[Any]]) -> BaseDistribution | None:
    """The distribution a value was drawn from, as Optuna's tools should read it.

    A declared choice list is a ``CategoricalDistribution`` of exactly those choices (``BLOCK`` in [256, 512,
    1024] is three options, not the continuum between them); a value the candidate fixes without a choice list
    is a point of its numeric kind. Strings without a list and values outside their list are kept in
    ``user_attrs["params"]`` only.
    """
    choices = space.get(name)
    if choices:
        if not all(isinstance(c, _PLAIN) for c in choices) or not _among(value, choices):
            return None
        return CategoricalDistribution(list(dict.fromkeys(choices)))
    if isinstance(value, bool):
        return CategoricalDistribution([False, True])
    if isinstance(value, int):
        return IntDistribution(value, value)
    if isinstance(value, float):
        return FloatDistribution(value, value)
    return None


def _among(value: Any, choices: Any) -> bool:
    """``value in choices`` without Python's ``True == 1``: a choice counts only with its own type."""
    return any(type(c) is type(value) and c == value for c in choices)


def _conform(value: Any, new: BaseDistribution, recorded: BaseDistribution | None) -> BaseDistribution | None:
    """The distribution to record ``value`` under in a study that may already hold the parameter.

    Optuna fixes a parameter's kind (and a categorical's choices) at its first trial in a study; a later structure
    may declare other choices. The value is recorded under the study's distribution where that holds it, and
    left to ``user_attrs["params"]`` where it cannot (the trial is still recorded).
    """
    if recorded is None or recorded == new:
        return new
    if isinstance(recorded, CategoricalDistribution):
        return recorded if _among(value, recorded.choices) else None
    if isinstance(new, CategoricalDistribution):  # a numeric parameter so far: the value as a point of that kind
        if isinstance(recorded, IntDistribution) and type(value) is int:
            return IntDistribution(value, value, log=recorded.log)
        if isinstance(recorded, FloatDistribution) and type(value) in (int, float):
            return FloatDistribution(float(value), float(value), log=recorded.log)
        return None
    if type(new) is type(recorded) and not getattr(recorded, "log", False):
        return new  # numeric ranges may differ between trials; kinds may not
    return None


def _artifact_id(filename: str, data: bytes) -> str:
    """Content-addressed: the same file of two trials is one artifact (and one ``trials_dataframe`` column)."""
    return str(uuid.UUID(hashlib.sha256(filename.encode() + b"\0" + data).hexdigest()[:32]))


def _when(epoch_s: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(epoch_s)  # Optuna's own clock: naive local time (datetime.now())


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An RDB storage, with a one-line error when it does not connect."""
    try:
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            # A longer busy timeout: two processes on one SQLite study wait for the lock instead of failing.
            return _rdb_storage(url, {"connect_args": {"timeout": 60}})
        return _rdb_storage(url, {"pool_pre_ping": True})
    except Exception as e:
        reason = _redact_password(url, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
        if isinstance(e, ImportError):
            fix = f"install its database driver (pip install {_driver_package(url, e)})"
        elif e.__class__.__name__ == "ArgumentError":
            fix = "give an RDB URL such as postgresql+psycopg2://USER:PASSWORD@HOST:5432/DB or sqlite:///PATH.db"
        else:
            fix = ("check that the database server is up and the URL's user, host, port and database, "
                   "or leave --storage out to record in the run directory's SQLite file")
        raise UsageError(f"--storage {redact_url(url)}: cannot connect ({e.__class__.__name__}: {reason}); "
                         f"{fix}") from None


class RecordStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage, with a finished trial written in one transaction of bulk inserts (``record_trial``).

    ``create_new_trial(template_trial=...)`` in Optuna looks the trial up again for every parameter and attribute,
    asks the study's first record of each parameter again, runs an upsert per user and system attribute, and copies
    the template; ``get_trial_number_from_id`` then opens a second session. For the ~35 rows of one evaluation that
    was 119 ms of the driver's CPU per trial on SQLite (experiments/results/scale/), which held a campaign to five
    evaluations a second. A trial written here is new, so plain inserts write the same rows; each parameter is still
    checked against the distribution the study recorded first (Optuna's ``check_distribution_compatibility``, a
    ``ValueError`` as Optuna raises it), read once per parameter and kept: a recorded distribution never changes.
    """

    _first: dict[tuple[int, str], BaseDistribution]

    def _first_distribution(self, session: Any, study_id: int, name: str) -> BaseDistribution | None:
        from optuna.storages._rdb import models

        first = self.__dict__.setdefault("_first", {})
        if (study_id, name) not in first:
            row = (session.query(models.TrialParamModel).join(models.TrialModel)
                   .filter(models.TrialModel.study_id == study_id)
                   .filter(models.TrialParamModel.param_name == name).first())
            if row is None:
                return None
            first[(study_id, name)] = optuna.distributions.json_to_distribution(row.distribution_json)
        return first[(study_id, name)]

    def record_trial(self, study_id: int, trial: optuna.trial.FrozenTrial, attempts: int = 5) -> tuple[int, int]:
        """Write the finished ``trial`` into the study; returns (trial id, trial number). Retried, as Optuna retries
        a trial's creation, where the database reports a deadlock or a timeout."""
        from optuna.storages._rdb.storage import _create_scoped_session

        assert trial.state.is_finished() and not trial.intermediate_values
        for attempt in range(1, attempts + 1):
            try:
                with _create_scoped_session(self.scoped_session) as session:
                    return self._insert_finished(session, study_id, trial)
            except optuna.exceptions.StorageInternalError:
                if attempt == attempts:
                    raise
                time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    def _insert_finished(self, session: Any, study_id: int, template: optuna.trial.FrozenTrial) -> tuple[int, int]:
        from optuna.storages._rdb import models

        # The study's row locked first, as Optuna does: the trial's number counts the trials before it.
        models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
        for name in template.params:  # before anything is written: a mismatch writes nothing
            first = self._first_distribution(session, study_id, name)
            if first is not None:
                optuna.distributions.check_distribution_compatibility(first, template.distributions[name])
        trial = models.TrialModel(study_id=study_id, number=None, state=template.state,
                                  datetime_start=template.datetime_start,
                                  datetime_complete=template.datetime_complete)
        session.add(trial)
        session.flush()
        trial_id = trial.trial_id
        values = []
        for objective, value in enumerate(template.values or []):
            stored, kind = models.TrialValueModel.value_to_stored_repr(value)
            values.append({"trial_id": trial_id, "objective": objective, "value": stored, "value_type": kind})
        params = [{"trial_id": trial_id, "param_name": name,
                   "param_value": template.distributions[name].to_internal_repr(value),
                   "distribution_json": optuna.distributions.distribution_to_json(template.distributions[name])}
                  for name, value in template.params.items()]
        for model, rows in ((models.TrialValueModel, values), (models.TrialParamModel, params),
                            (models.TrialUserAttributeModel, [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)}
                                                              for k, v in template.user_attrs.items()]),
                            (models.TrialSystemAttributeModel, [{"trial_id": trial_id, "key": k,
                                                                 "value_json": json.dumps(v)}
                                                                for k, v in template.system_attrs.items()])):
            if rows:
                session.execute(sqlalchemy.insert(model), rows)
        trial.number = number = trial.count_past_trials(session)
        return trial_id, number


def _rdb_storage(url: str, engine_kwargs: dict[str, Any], attempts: int = 5) -> optuna.storages.RDBStorage:
    """RDBStorage, retried while another process is creating the same fresh database's schema.

    Two processes opening a new database at once (two writers of one study, a campaign and its dashboard)
    race on Optuna's schema and version row; the loser sees a duplicate, and succeeds once the winner is done.
    """
    for attempt in range(attempts):
        try:
            return RecordStorage(url, engine_kwargs=engine_kwargs)
        except Exception as e:
            racing = e.__class__.__name__ == "IntegrityError" or "already exists" in str(e)
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _driver_package(url: str, error: ImportError) -> str:
    """The pip package of the driver SQLAlchemy failed to import (the module it names, else the URL's)."""
    cause = error.__cause__ if isinstance(error.__cause__, ImportError) else error
    module = cause.name or url.split("://", 1)[0].partition("+")[2] or url.split("://", 1)[0]
    return {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'", "MySQLdb": "mysqlclient"}.get(module, module)


def _redact_password(url: str, text: str) -> str:
    if "://" in url and "@" in url:
        creds = url.split("://", 1)[1].rsplit("@", 1)[0]
        if ":" in creds and creds.split(":", 1)[1]:
            text = text.replace(creds.split(":", 1)[1], "***")
    return text


def redact_url(url: str) -> str:
    """Hide a password in a database URL before it reaches a message or a file."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


class OptunaStore:
    """The ``Store`` of evoforge: one Optuna study per (campaign, task) in any RDB storage (SQLite by default,
    PostgreSQL for a cluster), candidates as JSON files and sources, prompts and replies as Optuna artifacts in
    the run directory."""

    def __init__(self, *, run_dir: Path, campaign: str, storage_url: str = "") -> None:
        self.run_dir = Path(run_dir)
        self.campaign = campaign
        self.storage_url = storage_url or f"sqlite:///{(self.run_dir / 'optuna.db').resolve()}"
        self.storage = open_storage(self.storage_url)
        self.candidates_dir = self.run_dir / "candidates"
        self.candidates_dir.mkdir(parents=True, exist_ok=True)
        self.artifacts = FileSystemArtifactStore(str(self.run_dir / "artifacts"))
        (self.run_dir / "artifacts").mkdir(parents=True, exist_ok=True)
        self._studies: dict[str, optuna.Study] = {}
        self._recorded: dict[int, dict[str, BaseDistribution]] = {}  # study id -> distribution of each parameter

    def study_name(self, task_name: str) -> str:
        return f"{self.campaign}/{task_name}"

    def study(self, task_name: str, *, note: str = "") -> optuna.Study:
        if task_name not in self._studies:
            try:  # Optuna's load_if_exists tries the insert first: a resume would write for each of its tasks
                study = optuna.load_study(study_name=self.study_name(task_name), storage=self.storage)
            except KeyError:
                study = optuna.create_study(study_name=self.study_name(task_name), storage=self.storage,
                                            direction="maximize", load_if_exists=True)
            # A resumed study has them already: read, not written again (three commits a task, a thousand tasks)
            if study.metric_names != ["speedup"]:
                with warnings.catch_warnings():  # "experimental" on every run: noise around a one-line error
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.set_metric_names(["speedup"])
            held = study.user_attrs
            for key, value in (("campaign", self.campaign), ("task", task_name)):
                if held.get(key) != value:
                    study.set_user_attr(key, value)
            self._studies[task_name] = study
        return self._studies[task_name]

    def existing(self, task_name: str) -> tuple[int, dict[str, Any]]:
        """How many trials the task's study already holds, and its user attributes; (0, {}) when there is no such
        study. Reads only: nothing is created."""
        try:
            study_id = self.storage.get_study_id_from_name(self.study_name(task_name))
        except KeyError:
            return 0, {}
        return self.storage.get_n_trials(study_id), dict(self.storage.get_study_user_attrs(study_id))

    def save_candidate(self, candidate: Candidate) -> None:
        path = self.candidates_dir / f"{candidate.id}.json"
        if not path.exists():
            atomic_write(path, json.dumps(candidate.to_dict()))

    def load_candidate(self, candidate_id: str) -> Candidate | None:
        path = self.candidates_dir / f"{candidate_id}.json"
        try:
            return Candidate.from_dict(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            return None

    def record(self, task_name: str, candidate: Candidate, result: EvalResult, *,
               extra_attrs: dict[str, Any] | None = None, started_at: float | None = None,
               finished_at: float | None = None) -> int:
        """One finished trial. Returns its number. A full disk is ``DiskFull`` (one line), not a traceback.

        ``started_at`` and ``finished_at`` (epoch seconds) are when the evaluation was handed to an evaluator and
        when its result came back: the trial's ``datetime_start`` and ``datetime_complete``, which Optuna's
        timeline and durations read. Left out: the result's own ``eval_s``, ending now.
        """
        try:
            return self._record(task_name, candidate, result, extra_attrs, started_at, finished_at)
        except DiskFull:
            raise
        except Exception as e:
            if no_space_left(e):
                where = self.run_dir if self.storage_url.startswith("sqlite:") else Path(redact_url(self.storage_url))
                raise disk_full_error(where, self.run_dir) from None
            raise

    def _record(self, task_name: str, candidate: Candidate, result: EvalResult,
                extra_attrs: dict[str, Any] | None, started_at: float | None, finished_at: float | None) -> int:
        self.save_candidate(candidate)
        study = self.study(task_name)
        study_id = study._study_id
        meta = candidate.meta
        attrs: dict[str, Any] = {
            "status": str(result.status), "message": result.message[:MESSAGE_LIMIT],
            "operator": candidate.operator, "stage": candidate.stage, "parents": list(candidate.parents),
            "candidate_id": candidate.id, "structure_id": candidate.structure_id,
            "runtime_ms": result.runtime_ms, "ref_ms": result.ref_ms, "speedup": result.speedup,
            "max_abs_err": result.max_abs_err, "criterion": result.criterion, "pct_of_floor": result.pct_of_floor,
            "below_floor": result.below_floor, "timing_representative": result.timing_representative,
            "backend": result.backend, "arch": result.arch, "eval_s": result.eval_s, "cached": result.cached,
            "language": candidate.language, "compile_s": result.compile_s,
            "params": json.dumps(candidate.params, sort_keys=True, default=str),
            "recorded_at": time.time(),
        }
        for key in ("model", "prompt_tokens", "completion_tokens", "cost_usd"):
            if key in meta:
                attrs[key] = meta[key]
        if result.details.get("kernels"):  # which kernels ran at each shape (a seed's main-shape path, its generic one)
            attrs["kernels_by_shape"] = json.dumps(result.details["kernels"], sort_keys=True)[:MESSAGE_LIMIT]
        attrs.update(extra_attrs or {})
        finished = finished_at if finished_at is not None else time.time()
        started = started_at if started_at is not None else finished - max(float(result.eval_s or 0.0), 0.0)
        # The artifacts first (content-addressed files), then the trial in one step, finished: a kill in between
        # leaves at most a file no trial names, never a half-written trial.
        system_attrs: dict[str, Any] = {"evoforge:result": json.dumps(json_safe(result.to_dict()))}
        system_attrs.update(self._write_artifacts(candidate))
        ok = result.status is EvalStatus.OK and result.speedup is not None
        for attempt in range(2):
            params, distributions = self._params(study_id, candidate, refresh=attempt > 0)
            trial = optuna.trial.create_trial(
                state=TrialState.COMPLETE if ok else TrialState.FAIL, value=float(result.speedup) if ok else None,
                params=params, distributions=distributions, user_attrs=attrs, system_attrs=system_attrs)
            trial.datetime_start = _when(min(started, finished))
            trial.datetime_complete = _when(finished)
            try:
                if isinstance(self.storage, RecordStorage):
                    number = self.storage.record_trial(study_id, trial)[1]
                else:
                    number = self.storage.get_trial_number_from_id(
                        self.storage.create_new_trial(study_id, template_trial=trial))
                break
            except ValueError:  # another writer fixed a parameter's distribution meanwhile: conform and retry
                if attempt:
                    raise
        self._recorded.setdefault(study_id, {}).update(
            {k: v for k, v in distributions.items() if k not in self._recorded.get(study_id, {})})
        return number

    def _params(self, study_id: int, candidate: Candidate, *,
                refresh: bool = False) -> tuple[dict[str, Any], dict[str, BaseDistribution]]:
        """The candidate's parameters that Optuna can hold, each under the distribution its study records."""
        if refresh or study_id not in self._recorded:
            recorded: dict[str, BaseDistribution] = {}
            for t in self.storage.get_all_trials(study_id, deepcopy=False):
                for name, dist in t.distributions.items():
                    recorded.setdefault(name, dist)
            self._recorded[study_id] = recorded
        recorded = self._recorded[study_id]
        params, distributions = {}, {}
        for name, value in candidate.params.items():
            dist = _distribution(name, value, candidate.space)
            dist = _conform(value, dist, recorded.get(name)) if dist is not None else None
            if dist is not None:
                params[name], distributions[name] = value, dist
        return params, distributions

    def _write_artifacts(self, candidate: Candidate) -> dict[str, str]:
        """Write the candidate's files to the artifact store; returns the trial's ``artifacts:<id>`` attributes
        (the metadata ``optuna.artifacts.upload_artifact`` writes, which optuna-dashboard lists)."""
        files = {"source.py": candidate.source}
        if "prompt" in candidate.meta:
            files["prompt.md"] = _render_prompt(candidate.meta["prompt"])
        if "reply" in candidate.meta:
            files["reply.md"] = str(candidate.meta["reply"])
        attrs = {}
        for filename, text in files.items():
            data = text.encode()
            artifact_id = _artifact_id(filename, data)
            if not (self.run_dir / "artifacts" / artifact_id).exists():
                self.artifacts.write(artifact_id, io.BytesIO(data))
            mimetype, encoding = mimetypes.guess_type(filename)
            attrs[f"artifacts:{artifact_id}"] = json.dumps({
                "artifact_id": artifact_id, "filename": filename,
                "mimetype": mimetype or "application/octet-stream", "encoding": encoding})
        return attrs

    def _finish(self, trial_id: int, result: EvalResult) -> None:
        ok = result.status is EvalStatus.OK and result.speedup is not None
        if ok:
            self.storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [float(result.speedup)])
        else:
            self.storage.set_trial_state_values(trial_id, TrialState.FAIL)

    def close_interrupted(self) -> int:
        """Close trials left RUNNING by a writer that died (as FAIL with the reason); returns how many. Trials are
        now written finished in one step; records of earlier versions (and other writers) may still hold some.
        Looked for in one query over the campaign's studies (``record_rows``), not by loading every trial."""
        from evoforge.search import record_rows

        open_states = (TrialState.RUNNING, TrialState.WAITING)
        if record_rows.is_rdb(self.storage):
            ids = record_rows.campaign_study_ids(self.storage, self.campaign + "/")
            found = [(r.trial_id, r.system_attrs.get(RESULT_ATTR))
                     for rows in record_rows.read_trials(self.storage, ids.values(), user_keys=(),
                                                         system_keys=[RESULT_ATTR], states=open_states).values()
                     for r in rows]
        else:
            found = [(t._trial_id, t.system_attrs.get(RESULT_ATTR)) for study in self._all_studies()
                     for t in study.get_trials(deepcopy=False, states=open_states)]
        for trial_id, raw in found:
            if raw is not None:  # evaluated and recorded; only its artifacts were cut short
                self._finish(trial_id, EvalResult.from_dict(json.loads(raw)))
            else:
                self.storage.set_trial_user_attr(trial_id, "status", "crashed")
                self.storage.set_trial_user_attr(trial_id, "message",
                                                 "interrupted: the campaign stopped while this trial ran")
                self.storage.set_trial_state_values(trial_id, TrialState.FAIL)
        return len(found)

    def _all_studies(self) -> Iterator[optuna.Study]:
        for summary in optuna.get_all_study_summaries(self.storage, include_best_trial=False):
            if summary.study_name.startswith(self.campaign + "/"):
                yield optuna.load_study(study_name=summary.study_name, storage=self.storage)

    def load(self, task_name: str, *, user_keys: Collection[str] | None = None) -> list[StoredTrial]:
        """Every finished trial of a task, in order, with its candidate and result.

        Read in bulk (``search.record_rows``: one query per table, not a ``FrozenTrial`` per trial): a resume of a
        100k-trial record reads each trial's result and the attributes it needs once. ``user_keys`` limits the
        attributes read (None: all of them); the candidate's lineage (``operator``, ``stage``, ``parents``,
        ``candidate_id``) is always read."""
        from evoforge.search import record_rows

        study_id = self.study(task_name)._study_id
        keys = None if user_keys is None else {*user_keys, *LINEAGE_KEYS}
        if record_rows.is_rdb(self.storage):
            rows = record_rows.read_trials(self.storage, [study_id], user_keys=keys,
                                           system_keys=[RESULT_ATTR])[study_id]
            trials = [(r.number, r.user_attrs, r.system_attrs.get(RESULT_ATTR)) for r in rows]
        else:
            trials = [(t.number, dict(t.user_attrs), t.system_attrs.get(RESULT_ATTR))
                      for t in self.storage.get_all_trials(study_id, deepcopy=False, states=record_rows.FINISHED)]
        out = []
        for number, attrs, raw in trials:
            candidate = self.load_candidate(attrs.get("candidate_id", ""))
            if candidate is None or raw is None:
                continue
            # One candidate file per id (source and params): a later child with the same id came from another
            # operator and parent, which its own trial recorded.
            candidate = replace(candidate, operator=str(attrs.get("operator", candidate.operator)),
                                stage=str(attrs.get("stage", candidate.stage)),
                                parents=tuple(attrs.get("parents", candidate.parents)))
            out.append(StoredTrial(number, candidate, EvalResult.from_dict(json.loads(raw)), attrs))
        return out


def _render_prompt(messages: Any) -> str:
    if isinstance(messages, list):
        return "\n\n".join(f"## {m.get('role', '?')}\n\n{m.get('content', '')}" for m in messages if isinstance(m, dict))
    return str(messages)


