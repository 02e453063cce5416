"""The record as Optuna's own tools read it: choice lists are categorical, a trial lasts as long as its
evaluation, artifacts do not multiply ``trials_dataframe``'s columns, and reading a record writes nothing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import optuna
from evoforge.search.store import OptunaStore
from optuna.artifacts import get_all_artifact_meta
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from evoforge.core import Candidate, EvalResult, EvalStatus

SOURCE = ("SPACE = {'BLOCK': [256, 512, 1024, 2048], 'num_warps': [2, 4, 8]}\n"
          "PARAMS = {'BLOCK': 1024, 'num_warps': 4}\nclass ModelNew:\n    pass\n")
OTHER = ("SPACE = {'BLOCK': [128, 256]}\nPARAMS = {'BLOCK': 128, 'SPLIT': 3}\n"
         "class ModelNew:  # another structure, other choices\n    pass\n")


def _ok(speedup: float, eval_s: float = 0.1) -> EvalResult:
    return EvalResult(EvalStatus.OK, runtime_ms=1.0 / speedup, ref_ms=1.0, speedup=speedup, eval_s=eval_s)


def _study(store: OptunaStore) -> optuna.Study:
    return optuna.load_study(study_name=store.study_name("t"), storage=store.storage)


def test_choice_lists_are_categorical_for_importance_and_slice_plots(tmp_path: Path) -> None:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    seed = Candidate.from_source(SOURCE, task="t")
    for i, block in enumerate((256, 512, 2048)):
        store.record("t", seed.with_params({"BLOCK": block}), _ok(1.0 + i))
    trials = _study(store).trials
    assert all(t.distributions["BLOCK"] == CategoricalDistribution([256, 512, 1024, 2048]) for t in trials)
    assert trials[0].distributions["num_warps"] == CategoricalDistribution([2, 4, 8])
    assert [t.params["BLOCK"] for t in trials] == [256, 512, 2048]
    # Optuna's own tools accept the record as it is.
    assert set(optuna.importance.get_param_importances(_study(store))) == {"BLOCK", "num_warps"}


def test_a_structure_with_other_choices_is_still_recorded(tmp_path: Path) -> None:
    """Optuna fixes a parameter's choices at its first trial; another structure's value is recorded where the
    study's choices hold it, and kept in user_attrs["params"] where they cannot."""
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    store.record("t", Candidate.from_source(SOURCE, task="t"), _ok(1.0))
    store.record("t", Candidate.from_source(OTHER, task="t", params={"BLOCK": 256}), _ok(1.5))
    store.record("t", Candidate.from_source(OTHER, task="t"), _ok(2.0))  # BLOCK 128: not among the first's
    trials = _study(store).trials
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    assert trials[1].params["BLOCK"] == 256 and "BLOCK" not in trials[2].params
    assert json.loads(trials[2].user_attrs["params"]) == {"BLOCK": 128, "SPLIT": 3}
    assert trials[2].distributions["SPLIT"] == IntDistribution(3, 3)  # a fixed value, not a choice
    assert [s.candidate.params["BLOCK"] for s in store.load("t")] == [1024, 256, 128]


def test_a_trial_lasts_from_hand_over_to_result(tmp_path: Path) -> None:
    """The timeline and durations of optuna-dashboard show how long an evaluation took, not when it was written."""
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    start = dt.datetime(2025, 3, 1, 12, 0, 0).timestamp()
    store.record("t", Candidate.from_source(SOURCE, task="t"), _ok(1.0), started_at=start, finished_at=start + 6.5)
    store.record("t", Candidate.from_source(SOURCE, task="t", params={"BLOCK": 512}),
                 EvalResult.failure(EvalStatus.INCORRECT, "wrong", eval_s=2.0))
    first, second = _study(store).trials
    assert first.datetime_start == dt.datetime(2025, 3, 1, 12, 0, 0)
    assert first.duration == dt.timedelta(seconds=6.5)
    assert second.state == TrialState.FAIL and second.duration == dt.timedelta(seconds=2.0)  # its own eval_s


def test_artifacts_do_not_add_a_dataframe_column_per_trial(tmp_path: Path) -> None:
    """Parameter moves share their structure's source.py: one artifact, one column, every trial still opens it."""
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    seed = Candidate.from_source(SOURCE, task="t")
    for i, block in enumerate((256, 512, 1024, 2048, 256, 512)):
        store.record("t", seed.with_params({"BLOCK": block, "num_warps": (2, 4, 8)[i % 3]}), _ok(1.0 + i))
    study = _study(store)
    columns = [c for c in study.trials_dataframe().columns if c.startswith("system_attrs_artifacts")]
    assert len(columns) == 1
    for t in study.trials:
        (meta,) = get_all_artifact_meta(t, storage=store.storage)
        assert meta.filename == "source.py"
        with store.artifacts.open_reader(meta.artifact_id) as f:
            assert f.read().decode() == SOURCE


def test_a_start_after_the_end_is_not_recorded_as_negative(tmp_path: Path) -> None:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    store.record("t", Candidate.from_source(SOURCE, task="t"), _ok(1.0), started_at=100.0, finished_at=50.0)
    assert _study(store).trials[0].duration == dt.timedelta(0)
