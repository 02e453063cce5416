"""The ``Backend`` contract (backends/base.py), one suite for every registered backend, as Optuna's pytest_samplers.

A new backend is correct by passing it: register it (``@register("name")``) and it is collected here. Where the
device is absent (no GPU on this machine) the members that need it are skipped with the backend's own reason;
what needs no device (availability, the evaluation process, the device count) is always checked.
"""

from __future__ import annotations

import inspect
import json

import pytest
from evoforge.backends.base import Backend, EvaluationProcess, Timing
from evoforge.backends.registry import backend_names, get_backend

from evoforge import knowledge
from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES
from tests.search.conftest import MATMUL

# What a backend needs to be built, where it needs more than a name.
OPTIONS = {"replay": {"landscape": str(MATMUL)}}
# Backends that run nothing: they answer from a record (``evaluate(candidate)``), so they time no function.
RECORDED = {"replay"}


@pytest.fixture(params=backend_names())
def backend(request: pytest.FixtureRequest) -> Backend:
    return get_backend(request.param, **OPTIONS.get(request.param, {}))


def _runs_here(backend: Backend) -> None:
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"{backend.name} is not available here: {reason}")


# The protocol's members, read without touching a device (``isinstance`` would evaluate a GPU's properties).
MEMBERS = sorted({n for n in vars(Backend) if not n.startswith("_")} | set(Backend.__annotations__))


def test_is_a_backend_named_by_its_registry_key(backend: Backend, request: pytest.FixtureRequest) -> None:
    missing = [m for m in MEMBERS if not _has(backend, m)]
    assert not missing, f"{type(backend).__name__} lacks {missing}"
    assert backend.name == request.node.callspec.params["backend"]
    if backend.available()[0]:
        assert isinstance(backend, Backend)


def _has(obj: object, member: str) -> bool:
    try:
        inspect.getattr_static(obj, member)
    except AttributeError:
        return False
    return True


def test_says_whether_it_runs_here_and_why(backend: Backend) -> None:
    ok, reason = backend.available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason.strip()


def test_describes_its_evaluation_process(backend: Backend) -> None:
    process = backend.evaluation_process()
    assert isinstance(process, EvaluationProcess)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in process.env.items())
    assert process.memory_limit_bytes is None or process.memory_limit_bytes > 1024**3
    json.dumps(process.env)  # plain values: it travels to Ray actors


def test_counts_its_devices(backend: Backend) -> None:
    count = backend.device_count()
    assert isinstance(count, int) and count >= 0
    if not backend.available()[0]:
        assert count == 0


def test_device_facts(backend: Backend) -> None:
    _runs_here(backend)
    assert isinstance(backend.device, str) and backend.device
    assert knowledge.resolve_arch(backend.arch) == backend.arch  # a knowledge-base key the rules apply to
    assert isinstance(backend.properties, dict) and backend.properties.get("name")
    assert backend.lock_key is None or isinstance(backend.lock_key, str)


def test_times_functions_in_turn(backend: Backend) -> None:
    _runs_here(backend)
    if backend.name in RECORDED:
        pytest.skip(f"{backend.name} runs nothing: its timings come from the record")
    calls = {"a": 0, "b": 0}

    def a() -> None:
        calls["a"] += 1

    def b() -> None:
        calls["b"] += 1

    backend.synchronize()
    timings = backend.time_interleaved({"a": a, "b": b}, budget_ms=20.0)
    assert set(timings) == {"a", "b"}
    for key, timing in timings.items():
        assert isinstance(timing, Timing) and timing.samples >= 1 and calls[key] > timing.samples
        assert 0 <= timing.min_ms <= timing.median_ms and isinstance(timing.representative, bool)


def test_recorded_backends_answer_from_the_record(backend: Backend) -> None:
    if backend.name not in RECORDED:
        pytest.skip(f"{backend.name} runs kernels")
    seed = backend.landscape.seed_candidate()  # type: ignore[attr-defined]
    assert backend.evaluate(seed).backend == backend.name  # type: ignore[attr-defined]


def test_an_evaluator_built_from_its_name_alone_judges_a_kernel(backend: Backend, relu_task) -> None:
    """The backend brings its own process set-up (the interpreter's TRITON_INTERPRET=1 and memory limit)."""
    _runs_here(backend)
    if backend.name in RECORDED:
        pytest.skip(f"{backend.name} runs nothing through the chain")
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    evaluator = Evaluator(backend=backend.name, options=ChainOptions(trials=1, timing=False), timeout_s=120)
    try:
        correct = Candidate.from_source((FIXTURES / "relu" / "correct.py").read_text(), task=relu_task.name)
        result = evaluator.evaluate(relu_task, correct)
        assert result.status is EvalStatus.OK, result.message
        assert result.backend == backend.name and result.arch == backend.arch
        wrong = Candidate.from_source((FIXTURES / "relu" / "missing_tail.py").read_text(), task=relu_task.name)
        assert evaluator.evaluate(relu_task, wrong).status is EvalStatus.INCORRECT
    finally:
        evaluator.close()
