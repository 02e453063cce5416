"""The seed templates: clean under the hard rules, and correct when run (Triton interpreter).

A campaign starts from these files; a seed that fails the chain gives a campaign nothing to evolve. Every entry
of knowledge/templates/index.yaml runs through the real verification chain at its small shape plus its odd
extra shape, once per ``test_params`` entry (the defaults and the template's other code paths).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from evoforge import knowledge
from evoforge.core import Candidate, declared_space
from evoforge.task import Task

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["matmul_grouped", "softmax_rows"])
@pytest.mark.parametrize("arch", ["nvidia-sm90", "nvidia-sm80", "nvidia-sm89", "intel-xe2", "intel-xe-hpc"])
def test_templates_break_no_hard_rule(name: str, arch: str) -> None:
    cand = Candidate.from_source(knowledge.template_source(name))
    assert cand.space and cand.params
    assert [v for v in knowledge.validate(cand, arch) if v.severity == "hard"] == []


def test_template_names() -> None:
    assert {"matmul_grouped", "softmax_rows"} <= set(knowledge.template_names())


RUN = r'''
import importlib.util, sys, torch
def load(path):
    spec = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
torch.manual_seed(0)
mm = load(sys.argv[1])
for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 5e-2)):
    for cfg in (dict(GROUP_M=8, PERSISTENT=0, INPUT_PRECISION="ieee"),
                dict(GROUP_M=1, PERSISTENT=1, INPUT_PRECISION="tf32x3")):
        mm.PARAMS.update(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, **cfg)
        A, B = torch.randn(150, 70, dtype=dtype), torch.randn(70, 130, dtype=dtype)
        err = (mm.ModelNew()(A, B).double() - A.double() @ B.double()).abs().max().item()
        assert err < tol, (dtype, cfg, err)
sm = load(sys.argv[2])
for looped in (0, 1):
    sm.PARAMS.update(LOOPED=looped, BLOCK=256)
    x = torch.randn(7, 1000)
    err = (sm.ModelNew()(x) - torch.softmax(x, -1)).abs().max().item()
    assert err < 1e-6, (looped, err)
print("templates ok")
'''


def test_templates_compute_the_right_function_in_every_form(interpreter_checks) -> None:
    """Each structural switch the rule operators flip (GROUP_M, PERSISTENT, INPUT_PRECISION, LOOPED) keeps the
    result right, at sizes that are not multiples of the tiles."""
    assert interpreter_checks.get("'forms'") == "ok", interpreter_checks.get("'forms'")


# ---- index.yaml: every listed template through the verification chain

TEMPLATES = REPO / "knowledge" / "templates"
INDEX = yaml.safe_load((TEMPLATES / "index.yaml").read_text())["templates"]

CASES = [
    pytest.param(file_name, task, params, id=f"{Path(file_name).stem}-{task.split('/')[-1]}-p{i}")
    for file_name, entry in INDEX.items()
    if entry.get("language", "triton") == "triton"  # CuTe runs on CUDA only: tests/backends/test_cute.py
    for task in entry["tasks"]
    for i, params in enumerate(entry.get("test_params") or [{}])
]


def for_task(value, task_name: str):
    """An entry's ``set`` or ``shapes``: the same for all its tasks, or one per task name (``other``: the rest)."""
    if isinstance(value, dict) and (task_name in value or "other" in value):
        return value.get(task_name, value.get("other"))
    return value


@pytest.mark.parametrize(("file_name", "task_name", "params"), CASES)
def test_template_passes_the_chain(file_name, task_name, params, interpreter_evaluator):
    """On the session's evaluation process (a process of its own would cost its start-up again), with this
    module's options: two correctness trials, no timing, two minutes for the largest template."""
    from evoforge.judge.options import ChainOptions

    entry = INDEX[file_name]
    task = Task.load(f"{task_name}.py", overrides=for_task(entry["set"], task_name),
                     shapes=for_task(entry["shapes"], task_name))
    source = (TEMPLATES / file_name).read_text()
    result = interpreter_evaluator.evaluate(task, Candidate.from_source(source, task=task.name, params=params),
                                            options=ChainOptions(trials=2, timing=False), timeout_s=120)
    assert result.ok, f"{file_name} on {task_name} with {params}: {result.status}: {result.message}"


@pytest.mark.parametrize("file_name", sorted(INDEX))
def test_manifest_entry_is_complete_and_params_are_in_space(file_name):
    entry = INDEX[file_name]
    for key in ("family", "tasks", "set", "shapes", "floor_passes", "memory_passes", "notes"):
        assert key in entry, f"{file_name}: index.yaml entry lacks {key}"
    assert entry["tasks"] and entry["shapes"]
    space, params = declared_space((TEMPLATES / file_name).read_text())
    assert space and params, f"{file_name}: no SPACE/PARAMS literals"
    for name, value in params.items():
        assert value in space.get(name, [value]), f"{file_name}: default {name}={value!r} is not in SPACE"
    for overrides in entry.get("test_params") or []:
        assert set(overrides) <= set(params), f"{file_name}: test_params names an unknown param"


def test_the_campaign_loader_finds_each_task_its_template():
    from evoforge.knowledge import find_template_for

    for file_name, entry in INDEX.items():
        for task_name in entry["tasks"]:
            found = find_template_for(Task.load(f"{task_name}.py"), entry.get("language", "triton"))
            assert found is not None and found.name == file_name, (task_name, found)


def _load_template(name: str, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when @triton.jit runs, i.e. while the module executes
    module_name = f"evoforge_template_test_{name}"
    spec = importlib.util.spec_from_file_location(module_name, TEMPLATES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module_name, module)  # Triton reads kernel source via the registered module
    spec.loader.exec_module(module)
    return module


def _batchnorm_train_check(momentum) -> None:
    """Run in a fresh interpreter-mode process: other tests import Triton in GPU mode first."""
    bn_template = _load_template("batchnorm", pytest.MonkeyPatch())
    bn_template.PARAMS["BLOCK"] = 64
    torch.manual_seed(0)
    reference = torch.nn.Module()
    reference.bn = torch.nn.BatchNorm2d(5, momentum=momentum)
    with torch.no_grad():
        reference.bn.weight.uniform_(0.5, 1.5)
        reference.bn.bias.uniform_(-1, 1)
        reference.bn.running_var.uniform_(1, 2)
    candidate = bn_template.ModelNew(5)
    candidate.bn.momentum = momentum
    candidate.load_state_dict(reference.state_dict())
    for _ in range(2):
        x = torch.randn(3, 5, 7, 13) * 3 + 10  # a large mean: shifted sums must not cancel
        with torch.no_grad():
            torch.testing.assert_close(candidate(x), reference.bn(x), atol=1e-4, rtol=1e-4)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(candidate.bn, name), getattr(reference.bn, name), atol=1e-5, rtol=1e-5)
    assert int(candidate.bn.num_batches_tracked) == int(reference.bn.num_batches_tracked) == 2


MOMENTA = (0.1, None)


@pytest.fixture(scope="module")
def interpreter_checks(tmp_path_factory) -> dict[str, str]:
    """The checks that need a fresh interpreter-mode process, in one (one start-up of torch and Triton, not one per
    check): every momentum's batch-norm check, and ``'forms'``, the templates in every form (``RUN`` on the GEMM
    and softmax templates, run as its own script): check -> "ok" or the failure it raised."""
    script = tmp_path_factory.mktemp("templates") / "run_templates.py"
    script.write_text(RUN)
    folder = REPO / "knowledge" / "templates"
    argv = [str(script), str(folder / "matmul_grouped.py"), str(folder / "softmax_rows.py")]
    code = ("import runpy, sys, traceback\n"
            "from tests.knowledge.test_templates import MOMENTA, _batchnorm_train_check\n"
            "def forms():\n"
            f"    sys.argv = {argv!r}\n"
            "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "for m, check in [*((m, lambda m=m: _batchnorm_train_check(m)) for m in MOMENTA), ('forms', forms)]:\n"
            "    try:\n"
            "        check()\n"
            "        print(f'RESULT {m!r} ok', flush=True)\n"
            "    except Exception:\n"
            "        print(f'RESULT {m!r} ' + traceback.format_exc().replace(chr(10), ' | '), flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line.split(" ", 2)[1:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return {key: outcome for key, outcome in lines}


@pytest.mark.parametrize("momentum", MOMENTA)
def test_batchnorm_train_mode_matches_torch_including_running_stats(momentum, interpreter_checks):
    """The training path (batch stats, running-stat update), checked against nn.BatchNorm2d directly."""
    assert interpreter_checks.get(repr(momentum)) == "ok", interpreter_checks.get(repr(momentum))


@pytest.mark.parametrize("file_name", sorted(INDEX))
def test_indexed_template_breaks_no_hard_rule_on_hopper(file_name):
    cand = Candidate.from_source((TEMPLATES / file_name).read_text())
    assert [v for v in knowledge.validate(cand, "nvidia-sm90") if v.severity == "hard"] == []


def test_a_task_whose_template_is_an_algebraic_rewrite_admits_fewer_flops_wherever_the_entry_serves_it(tmp_path):
    """L2/14's template sums W's columns before a GEMV (two memory-bound passes where the reference runs a 137 GFLOP
    GEMM): every evaluation of it was ``implausible`` under the judge's compute floor (12 of 12 in a campaign on an
    H100, 2026-12-06), so the task got no kernel. Its entry's ``allow`` now reaches the task a campaign loads, and the
    floor then admits the time; the memory floor still holds. Adversarial: a task whose entry says nothing (L2/12's
    GEMM template) gets no allowance, and a time under the memory floor stays implausible."""
    from evoforge.judge.floor import floor_verdict

    from evoforge.campaign import Campaign
    from evoforge.config import config_from_dict
    from evoforge.core import EvalStatus

    tasks = [{"spec": "L2/14", "set": {"batch_size": 8, "input_size": 16, "hidden_size": 12}},
             {"spec": "L2/12", "set": {"batch_size": 8, "in_features": 16, "out_features": 12}}]
    config = config_from_dict({"campaign": {"backend": "interpreter", "budget_evals": 2, "out": str(tmp_path / "run")},
                               "tasks": tasks}, source="test")
    campaign = Campaign(config, progress=False)
    campaign.prepare()
    allow = {name: state.task.allow for name, state in campaign.tasks.items()}
    assert allow["level2/14_Gemm_Divide_Sum_Scaling"] == ("fewer_flops",), allow
    assert "fewer_flops" not in allow["level2/12_Gemm_Multiply_LeakyReLU"], allow
    floors = {"memory_floor_ms": 0.08, "compute_floor_ms": 0.4167, "flops": 1.37e11}
    for name, admitted in allow.items():  # the H100 campaign's 0.1233 ms under the compute floor
        status, _ = floor_verdict(0.1233, **floors, allow=admitted)
        assert (status is None) == ("fewer_flops" in admitted), (name, status)
    assert floor_verdict(0.05, **floors, allow=allow["level2/14_Gemm_Divide_Sum_Scaling"])[0] == EvalStatus.IMPLAUSIBLE
    # Admitted, the rewrite's time is the task's best: on an H100 (2026-12-07) L2/14's 30 correct evaluations at 22x
    # were all flagged below the floor, and the campaign exported no kernel ("no correct kernel was found").
    from evoforge.judge.floor import below_floor

    from evoforge.core import EvalResult

    state = campaign.tasks["level2/14_Gemm_Divide_Sum_Scaling"]
    result = EvalResult(status=EvalStatus.OK, runtime_ms=0.1233, ref_ms=2.73, speedup=2.73 / 0.1233,
                        timing_representative=True, backend="cuda", arch="nvidia-sm90",
                        below_floor=below_floor(0.1233, compute_floor_ms=0.4167, allow=state.task.allow))
    state.history.append((state.seed, result))
    state.results[state.seed.id] = result
    assert state.best() is not None and state.best()[1].speedup > 20
    assert below_floor(0.1233, compute_floor_ms=0.4167, allow=())  # not admitted: flagged, never the best
