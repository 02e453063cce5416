"""The landscape recorder runs end to end on the interpreter (--smoke), so the GPU call never finds it broken, and
what it writes is a landscape the replay backend and the search benchmark read."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from evoforge.backends.replay import Landscape

from evoforge.core import EvalStatus
from tests.experiments.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "experiments" / "benchmarks" / "record_landscape.py"
HOLDOUT = REPO / "experiments" / "results" / "search" / "landscapes" / "holdout_2026-12-03.json"


def _recorder():
    return load_script("record_landscape")


SPECS = _recorder().SPECS
NAMES = list(SPECS)
FIRST = ["matmul_fp32_split_4096", "matmul_fp16_acc_4096", "matmul_fp16_fp8_4096", "matmul_fp16_acc_2048"]
NEW = [n for n in NAMES if n not in FIRST]  # issue T's landscapes
# The values recorded because they are fast and wrong (the rest must pass the chain's comparator at any size).
UNSAFE = {"PRECISION": "tf32", "INPUT_PRECISION": "tf32", "ACC": "fp16", "OPERANDS": "fp8"}


def _smoke(out: Path, names: list[str], workers: int) -> str:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *names, "--smoke", "--workers", str(workers), "--out",
                           str(out)], cwd=REPO, env=env, text=True, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """Every landscape at its smoke shape, compiled in the measuring process (worker processes: one test below)."""
    out = tmp_path_factory.mktemp("landscapes")
    stdout = _smoke(out, [], workers=0)  # no names: all of them
    assert all(f"{name}.json:" in stdout for name in NAMES)  # one summary line per landscape
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_choice_is_recorded_and_replays(smoke: Path, name: str) -> None:
    landscape = Landscape.load(smoke / f"{name}.json")
    for param, values in landscape.space.items():
        if not all(isinstance(v, int) for v in values):  # every value of a categorical choice is exercised
            assert {r[param] for r in landscape.rows} == set(values), param
    for row in landscape.rows:
        assert row["status"] in ("ok", "incorrect") and row["ms"] is not None
        result = landscape.evaluate(landscape.params_of(row))
        assert result.status is (EvalStatus.OK if row["status"] == "ok" else EvalStatus.INCORRECT)
    data = json.loads((smoke / f"{name}.json").read_text())
    assert data["recorded"]["complete"] and not data["recorded"]["timing_representative"]


def test_fp8_operands_are_judged_incorrect_by_the_chain_comparator(smoke: Path) -> None:
    rows = {r["OPERANDS"]: r for r in json.loads((smoke / "matmul_fp16_fp8_4096.json").read_text())["rows"]}
    assert rows["fp16"]["status"] == "ok"
    assert rows["fp8"]["status"] == "incorrect" and rows["fp8"]["rel_err"] > 10 * rows["fp16"]["rel_err"]


def test_configs_that_build_one_kernel_share_one_measurement(smoke: Path) -> None:
    rows = json.loads((smoke / "matmul_fp32_split_4096.json").read_text())["rows"]
    shared = [r for r in rows if "same_as" in r]
    assert shared and all(r["SPLIT"] != "none" for r in shared)  # PRECISION is read only when SPLIT is none
    for r in shared:
        first = next(m for m in rows if all(m[k] == v for k, v in r["same_as"].items()) and "same_as" not in m)
        assert (r["ms"], r["status"]) == (first["ms"], first["status"])


@pytest.mark.parametrize(("bits", "status"), [(16, "ok"), (11, "incorrect")])
def test_an_fp32_result_is_judged_as_the_chain_judges_it(bits: int, status: str) -> None:
    """A 3-pass split keeps 16 significant bits of each fp32 input and the chain passes it; plain TF32 keeps 11
    and fails. The recorder must give the chain's verdict, or its landscape teaches the search a false cause."""
    import types

    import torch
    from evoforge.judge import compare

    recorder = _recorder()
    gen = torch.Generator().manual_seed(0)
    inputs = (torch.randn(256, 512, generator=gen), torch.randn(512, 256, generator=gen))

    class ModelNew(torch.nn.Module):
        def forward(self, a, b):  # the dot at the precision of a kernel that keeps ``bits`` of each input
            a, b = compare.round_significand([a, b], bits)
            return (a.double() @ b.double()).float()

    template = types.SimpleNamespace(PARAMS={}, ModelNew=ModelNew)
    references = recorder.float64_references(inputs, compare.round_significand)
    row = recorder.measure(template, {}, inputs, recorder.reference(*inputs), references, compare.compare_outputs,
                           smoke=True)
    assert row["status"] == status, row


@pytest.mark.parametrize("name", NEW)
def test_a_config_without_an_unsafe_value_is_correct_at_an_awkward_size(smoke: Path, name: str) -> None:
    """Masked tails (3000 or 50257 columns, odd GEMM sizes), split-K slices, persistent grids: the recorder judges
    each with the chain's comparator against the task's own reference, and a safe config must pass."""
    data = json.loads((smoke / f"{name}.json").read_text())
    safe = [r for r in data["rows"] if not any(r.get(k) == v for k, v in UNSAFE.items())]
    assert safe and [r for r in safe if r["status"] != "ok"] == []
    shape = {k: data[k] for k in "MNK"} if SPECS[name].problem == "matmul" else data["shape"]
    assert shape == SPECS[name].smoke


def test_the_precompile_workers_build_what_the_measuring_process_runs(tmp_path: Path, smoke: Path) -> None:
    """Worker processes construct ModelNew with the task's init arguments (LayerNorm's normalized_shape) at the
    spec's shape; the verdicts are those of the run without them."""
    name = "layernorm_fp32_64x1000x1000"
    _smoke(tmp_path, [name], workers=1)
    verdicts = [[(r["status"], r["rel_err"]) for r in json.loads((d / f"{name}.json").read_text())["rows"]]
                for d in (tmp_path, smoke)]
    assert verdicts[0] == verdicts[1]


@pytest.mark.parametrize("name", NAMES)
def test_a_precompile_shape_builds_the_kernels_of_the_full_shape(name: str) -> None:
    """Triton keys a kernel on its constexprs and on each integer argument's divisibility by 16: a GEMM's
    precompile shape keeps every size's residue class, a reduction's keeps every size but the leading (rows)."""
    spec = SPECS[name]
    assert set(spec.shape) == set(spec.smoke) == set(spec.precompile)
    if spec.problem == "matmul":
        assert {d: (n % 16 == 0, n == 1) for d, n in spec.shape.items()} == \
               {d: (n % 16 == 0, n == 1) for d, n in spec.precompile.items()}
    else:
        lead = next(iter(spec.shape))
        assert {d: n for d, n in spec.shape.items() if d != lead} == \
               {d: n for d, n in spec.precompile.items() if d != lead}
        assert spec.precompile[lead] % 16 == spec.shape[lead] % 16 and spec.precompile[lead] < spec.shape[lead]


def test_the_held_out_half_is_the_documented_draw() -> None:
    """holdout_2026-12-03.json names issue T's landscapes, half held out, drawn before any was recorded: its seed
    and procedure reproduce the split, and the two halves cover every new landscape once."""
    data = json.loads(HOLDOUT.read_text())
    assert sorted(data["held_out"] + data["design"]) == sorted(NEW)
    assert len(data["held_out"]) == len(data["design"])
    rng = random.Random(data["seed"])
    drawn = [sorted(rng.sample(group, len(group) // 2)) for group in data["drawn_from"].values()]
    assert data["held_out"] == [n for group in drawn for n in group]


TASK_SPECS = _recorder().TASK_SPECS
HOLDOUT_2 = HOLDOUT.with_name("holdout_2026-12-07.json")


def test_the_second_rounds_held_out_half_is_the_documented_draw() -> None:
    """holdout_2026-12-07.json names the task landscapes (an Inductor build's space, the convolution kernel's), half
    held out, drawn before any was recorded on a GPU: its seed and procedure reproduce the split."""
    data = json.loads(HOLDOUT_2.read_text())
    assert sorted(data["held_out"] + data["design"]) == sorted(TASK_SPECS)
    rng = random.Random(data["seed"])
    drawn = [sorted(rng.sample(group, len(group) // 2)) for group in data["drawn_from"].values()]
    assert data["held_out"] == [n for group in drawn for n in group]


def test_a_tasks_start_is_recorded_from_its_capture_and_judged_against_the_tasks_reference(tmp_path: Path) -> None:
    """A task landscape: the start built from the task's capture by the campaign's own set-up (here the committed
    CPU capture), its source written beside the file, every precision of the convolution kernel recorded and
    judged against the task's Model (its parameters built after the chain's seed, as ModelNew's are). The
    interpreter's dot is exact fp32 in ieee and tf32x3, so both pass; operands rounded to TF32 fall outside the
    float64 criterion where the reference is exact fp32 (the CPU's), and the replay answers as recorded."""
    name = "conv_l2_87_triton_conv"
    stdout = _smoke(tmp_path, [name, "inductor_l2_76_gemm_add_relu"], workers=0)
    assert f"{name}.json:" in stdout
    data = json.loads((tmp_path / f"{name}.json").read_text())
    source = Path(data["kernel"]) if Path(data["kernel"]).is_absolute() else REPO / data["kernel"]
    assert source == tmp_path / "sources" / f"{name}.py" and "_evoforge_conv(" in source.read_text()
    assert (data["task"], data["build"], data["shape"]) == ("L2/87", "triton-conv", TASK_SPECS[name].smoke_sizes)
    verdicts = {r["conv0_PRECISION"]: r["status"] for r in data["rows"]}
    assert set(verdicts) == set(TASK_SPECS[name].space["conv0_PRECISION"])
    assert (verdicts["ieee"], verdicts["tf32x3"], verdicts["tf32-round"]) == ("ok", "ok", "incorrect"), verdicts
    landscape = Landscape.load(tmp_path / f"{name}.json")
    for row in landscape.rows:
        if row["status"] in ("ok", "incorrect"):
            result = landscape.evaluate(landscape.params_of(row))
            assert result.status is (EvalStatus.OK if row["status"] == "ok" else EvalStatus.INCORRECT)
    # A GEMM template's precision inside an Inductor build: named by the build's own keys, every value correct on
    # the interpreter (bf16 parts are about 4e-6 from float64, within the chain's yardstick).
    gemm = json.loads((tmp_path / "inductor_l2_76_gemm_add_relu.json").read_text())
    assert {r["PRECISION"]: r["status"] for r in gemm["rows"]} == {"tf32x3": "ok", "bf16x3-split": "ok", "ieee": "ok"}


def test_a_space_key_that_names_no_key_or_several_of_the_builds_stops_the_recording() -> None:
    resolve = _recorder().resolve_space
    space = {"k0_XBLOCK": [1, 2], "k1_XBLOCK": [4], "k0_num_warps": [4], "conv0_PRECISION": ["ieee"]}
    assert resolve("x", {"num_warps": [4, 8], "conv0_PRECISION": ["ieee"]}, space) == {
        "k0_num_warps": [4, 8], "conv0_PRECISION": ["ieee"]}
    for wanted in ({"XBLOCK": [1]}, {"R0_BLOCK": [64]}):
        with pytest.raises(SystemExit, match="name its key in full"):
            resolve("x", wanted, space)
    # A GEMM template's build beside an element-wise kernel (L2/76 on the H100): the shared key is the template's,
    # whose BLOCK_M only it has; alone, it is still ambiguous.
    gemm = {"k0_XBLOCK": [64], "k0_num_warps": [4], "k1_BLOCK_M": [64], "k1_num_warps": [4]}
    assert resolve("x", {"BLOCK_M": [64, 128], "num_warps": [4, 8]}, gemm) == {
        "k1_BLOCK_M": [64, 128], "k1_num_warps": [4, 8]}
    with pytest.raises(SystemExit, match="name its key in full"):
        resolve("x", {"num_warps": [4, 8]}, gemm)
