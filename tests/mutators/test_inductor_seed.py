"""Seeds from torch.compile: Inductor's captured Triton turned into a candidate (pure), and one through the chain.

The captures in tests/fixtures/inductor/ were made on the CPU (``python -m evoforge.mutators.inductor_capture TASK
cpu OUT.json OVERRIDES``: Inductor asked for Triton under a stand-in driver, torch 2.13); a GPU capture has the
same form, with Inductor's configs for that device.
"""

from __future__ import annotations

import json

import pytest
from evoforge.judge.static import static_check
from evoforge.mutators.inductor_seed import InductorCapture, NoInductorSeed, _seed, seed_from_capture

from evoforge.core import Candidate, declared_space
from tests.conftest import FIXTURES

CAPTURES = FIXTURES / "inductor"


def _capture(name: str) -> InductorCapture:
    return InductorCapture.from_json((CAPTURES / name).read_text())


def _judge(evaluator, task, source: str):
    """The seed through the chain, as the campaign evaluates an ``inductor-seed``."""
    return evaluator.evaluate(task, Candidate.from_source(source, task=task.name, operator="inductor-seed"))


#: The tasks this module captures live, by the test that judges each: (spec, overrides, allow_ops).
LIVE_CAPTURES: dict[str, list[tuple[str, dict, tuple[str, ...]]]] = {
    "test_instancenorm_capture_keeps_the_channel_count_symbolic": [
        ("L1/34", {"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8}, ())],
    "test_a_module_float_read_by_a_stateless_model_reaches_the_seed": [("L1/20", {"batch_size": 2, "dim": 8}, ())],
    "test_an_instancenorm_whose_channel_count_differs_from_num_features_gets_its_main_shape_builds": [
        ("L2/28", {"batch_size": 8, "in_features": 32, "out_features": 16}, ())],
    "test_a_convolutions_channel_counts_stay_symbolic_in_a_vendor_seed": [
        ("L2/24", {"batch_size": 2, "in_channels": 3, "out_channels": 6, "D": 5, "H": 6, "W": 6}, ("convolution",))],
    "test_a_max_pool1d_length_stays_symbolic": [
        ("L1/41", {"batch_size": 2, "features": 4, "sequence_length": 64}, ())],
    "test_a_gemm_whose_k_dwarfs_m_and_n_still_gets_a_template_main_path": [("L1/6", {"M": 16, "N": 16, "K": 1024}, ())],
    "test_the_gemm_builds_are_the_first_variants_a_campaign_evaluates": [
        ("L2/55", {"batch_size": 8, "in_features": 32, "out_features": 16}, ()),
        ("L2/55", {"batch_size": 8, "in_features": 32, "out_features": 16}, ("addmm",))],
    "test_dropouts_seed_draw_is_no_vendor_call_and_the_task_starts_under_the_strict_rule": [
        ("L2/66", {"batch_size": 8, "in_features": 32, "out_features": 16}, ())],
    "test_a_transposed_convolution_task_starts_under_the_strict_rule": [
        ("L1/79", {"batch_size": 1, "in_channels": 2, "out_channels": 3, "length": 7}, ())],
    "test_convolution_tasks_start_under_the_strict_rule_as_window_gathers_and_gemms": [
        ("L1/76", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "length": 40}, ()),
        ("L1/82", {"batch_size": 2, "in_channels": 3, "width": 9, "height": 9}, ()),
        ("L1/76", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "length": 40}, ("convolution",))],
}

_CAPTURE_EACH = """
import json, sys, traceback
from pathlib import Path

from evoforge.mutators import inductor_capture

for task, out, overrides, allow_ops in json.loads(sys.argv[1]):
    try:
        inductor_capture.main([task, "cpu", out, overrides, allow_ops])
    except BaseException:
        Path(out + ".error").write_text(traceback.format_exc())
    import torch

    torch._dynamo.reset()
"""


def _key(spec: str, overrides: dict, allow_ops: tuple[str, ...]) -> str:
    return json.dumps([spec, overrides, list(allow_ops)], sort_keys=True)


@pytest.fixture(scope="module")
def live_capture(request, tmp_path_factory):
    """The tasks captured on the CPU by ``python -m evoforge.mutators.inductor_capture``'s own ``main``, as the coverage
    run and a campaign capture them, in a process apart from the tests: one process for the module's captures (those
    of the tests selected), each after ``torch._dynamo.reset()``, not one each: every process paid torch's and
    Inductor's imports again (about 7 s of each capture's 13 s). Returns ``capture(spec, overrides, allow_ops)``."""
    import subprocess
    import sys

    from evoforge.task import resolve_task_path

    selected = {item.originalname for item in request.session.items if item.module is request.module}
    jobs = {_key(*job): job for name, listed in LIVE_CAPTURES.items() if name in selected for job in listed}
    folder = tmp_path_factory.mktemp("captures")
    outs = {key: folder / f"capture-{i}.json" for i, key in enumerate(jobs)}
    args = [[str(resolve_task_path(spec)), str(outs[key]), json.dumps(overrides), json.dumps(list(allow_ops))]
            for key, (spec, overrides, allow_ops) in jobs.items()]
    proc = subprocess.run([sys.executable, "-c", _CAPTURE_EACH, json.dumps(args)], capture_output=True, text=True,
                          timeout=900 * max(1, len(args)))
    assert proc.returncode == 0, proc.stderr[-3000:]

    def capture(spec: str, overrides: dict, allow_ops: tuple[str, ...] = ()) -> InductorCapture:
        key = _key(spec, overrides, allow_ops)
        assert key in outs, f"{key}: add it to LIVE_CAPTURES under the test that captures it"
        failed = outs[key].with_name(outs[key].name + ".error")
        assert not failed.exists(), failed.read_text()[-3000:]
        return InductorCapture.from_json(outs[key].read_text())

    return capture


def test_relu_capture_becomes_a_tunable_standalone_candidate():
    source = seed_from_capture(_capture("level1_19_ReLU.cpu.json"))
    assert static_check(source) is None
    space, params = declared_space(source)
    # Inductor's choice is the default; its other config and powers of two around it are in the SPACE.
    assert params["XBLOCK"] == 256 and {64, 128, 256, 512, 1024} <= set(space["XBLOCK"])
    assert params["num_warps"] == 4 and len(space["num_warps"]) > 1
    # Standalone: nothing of torch's compiler is imported (the candidate's process refuses torch._inductor).
    assert "_inductor" not in source and "async_compile" not in source and "assert_size_stride" not in source
    # Sizes come from the input, so the seed holds at other shapes; the grid divides by the tuned block.
    assert "x.size()[0]" in source and "PARAMS['XBLOCK']" in source.split("class ModelNew")[1]


def test_vendor_calls_need_the_task_to_allow_them():
    capture = _capture("level2_76_Gemm_Add_ReLU.cpu.json")
    with pytest.raises(NoInductorSeed) as e:
        seed_from_capture(capture)
    message = str(e.value)
    assert "\n" not in message and 'allow_ops = ["addmm"]' in message  # the op the chain's op watch names
    source = seed_from_capture(capture, allow_ops=("addmm",))
    assert "torch.addmm(" in source and "extern_kernels" not in source and static_check(source) is None
    # The reference's Model makes the parameters: the chain loads the reference's state into the same names.
    assert "class TaskModel" in source and "def forward(self, x)" in source


def test_launches_the_conversion_cannot_grid_are_one_line():
    data = json.loads((CAPTURES / "level1_19_ReLU.cpu.json").read_text())
    data["output_code"] = data["output_code"].replace("'grid_type': 'Grid1D'", "'grid_type': 'FixedGrid'")
    with pytest.raises(NoInductorSeed, match="FixedGrid grid"):
        seed_from_capture(InductorCapture(**data))
    data["output_code"] = data["output_code"].replace("async_compile.triton(", "async_compile.cpp_pybinding(")
    with pytest.raises(NoInductorSeed, match="cpp_pybinding kernel for this task, not a Triton one"):
        seed_from_capture(InductorCapture(**data))


def test_a_compile_failure_with_an_empty_assertion_says_where_it_was_raised():
    """Four level-2 tasks failed on the H200 as "InductorError: AssertionError: " (the assertion had no text):
    the reason now names the file, line and check that raised it, and a failure that says something is kept as
    it was."""
    from evoforge.mutators.inductor_capture import compile_failure, raised_in

    def lower(channels):
        if channels < 2:
            raise AssertionError  # Inductor's bare asserts (pytest would rewrite an assert statement's text)

    class InductorError(RuntimeError):
        pass

    try:
        try:
            lower(0)
        except AssertionError as inner:
            raise InductorError(f"AssertionError: {inner}") from inner
    except InductorError as e:
        reason, err = compile_failure(e), e
    assert reason.startswith("InductorError: AssertionError; AssertionError raised at ")
    assert "test_inductor_seed.py" in reason and "in lower: raise AssertionError" in reason
    # the capture compiles again without the tiling analysis only when the innermost error was raised in it
    assert raised_in(err, "mutators/test_inductor_seed.py") and not raised_in(err, "_inductor/tiling_utils.py")
    try:
        raise ValueError("sizes differ: 3 and 4\nmore detail")
    except ValueError as e:
        assert compile_failure(e) == "ValueError: sizes differ: 3 and 4"


def test_the_relu_seed_passes_the_chain_at_a_retuned_block(interpreter_evaluator, relu_task):
    """Through the real chain (odd shape included) with a block size Inductor did not choose."""
    source = seed_from_capture(_capture("level1_19_ReLU.cpu.json"))
    seed = Candidate.from_source(source, task=relu_task.name, operator="inductor-seed")
    result = interpreter_evaluator.evaluate(relu_task, seed.with_params({"XBLOCK": 64, "num_warps": 2}))
    assert result.ok, result.message


def test_a_seed_with_parameters_follows_the_chains_odd_init_sizes(interpreter_evaluator):
    """nn.Linear(in_features, out_features) made from init inputs: the capture keeps the weight's sizes symbolic,
    so the seed holds when the chain draws in_features=31. Captured with the weight static, the seed wrote
    (32, 16) into its addmm and failed the odd shape with a RuntimeError."""
    from evoforge.task import Task

    source = seed_from_capture(_capture("level2_76_Gemm_Add_ReLU.cpu.json"), allow_ops=("addmm",))
    assert "(32, 16)" not in source
    task = Task.load("L2/76", overrides={"batch_size": 8, "in_features": 32, "out_features": 16, "bias_shape": [16]},
                     allow_ops=["addmm"])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_launch_configs_are_read_from_a_precompiled_kernel():
    """Loaded from Inductor's caches (or compiled in its parallel workers) a kernel has ``configs = None`` and its
    configs on its compile results: the capture read None and failed with a TypeError on the GPU."""
    from types import SimpleNamespace

    import triton
    from evoforge.mutators.inductor_capture import _kernel_configs

    a, b = triton.Config({"XBLOCK": 128}, num_warps=4), triton.Config({"XBLOCK": 1024}, num_warps=8)
    assert _kernel_configs(SimpleNamespace(configs=[a, b])) == [a, b]
    precompiled = SimpleNamespace(configs=None, compile_results=[SimpleNamespace(config=a), SimpleNamespace(config=b)])
    assert _kernel_configs(precompiled) == [a, b]
    assert _kernel_configs(SimpleNamespace(configs=None, compile_results=[], launchers=[SimpleNamespace(config=b)])) == [b]


def test_layernorm_seed_with_a_float_module_attribute_passes_the_chain(interpreter_evaluator):
    """LayerNorm's eps made dynamo trace twice (the first graph took eps as an input and was given up); the
    capture paired the code with the wrong graph count and refused the task. The code's own graph is kept."""
    from evoforge.task import Task

    capture = _capture("level1_40_LayerNorm.cpu.json")
    assert "eps" not in " ".join(capture.graph_inputs)
    source = seed_from_capture(capture)
    task = Task.load("L1/40", overrides={"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8},
                     shapes=[{"batch_size": 3}])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_layernorm_seed_holds_at_another_normalized_shape(interpreter_evaluator):
    """LayerNorm((features, dim1, dim2)) takes its shape from init inputs; dynamo read ``normalized_shape`` as a
    constant and the kernels carried the row length (256) as a literal, so at the chain's odd init sizes the seed
    computed the wrong function (on the H200: incorrect at features 63). The capture now reads the shape off the
    weight, whose sizes stay symbolic."""
    from evoforge.task import Task

    capture = _capture("level1_40_LayerNorm.cpu.json")
    assert any("weight'].size()" in g for g in capture.graph_inputs), capture.graph_inputs
    source = seed_from_capture(capture)
    task = Task.load("L1/40", overrides={"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8},
                     shapes=[{"features": 3, "dim2": 5}])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_plain_attributes_of_the_model_reach_the_seed(interpreter_evaluator):
    """The reference keeps a float on the module (``self.multiplier``) that Inductor's code reads as an input;
    the seed copied parameters, buffers and children only and raised AttributeError on the GPU."""
    from evoforge.task import Task

    source = seed_from_capture(_capture("level2_12_Gemm_Multiply_LeakyReLU.cpu.json"), allow_ops=("addmm",))
    task = Task.load("L2/12", overrides={"batch_size": 8, "in_features": 32, "out_features": 16}, allow_ops=["addmm"])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_instancenorm_capture_keeps_the_channel_count_symbolic(live_capture, interpreter_evaluator):
    """InstanceNorm2d compares the input's channel count to ``num_features`` (only to warn); dynamo guarded on it,
    so the channel count became a literal and the seed was wrong at the chain's odd size (on the H200: L1/34
    incorrect, 64 channels written where the odd size has 63). Captured here, live, as the coverage run does."""
    from evoforge.task import Task

    small = {"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8}
    capture = live_capture("L1/34", small)
    assert "L['x'].size()[1]" in capture.graph_inputs, capture.graph_inputs
    task = Task.load("L1/34", overrides=small, shapes=[{"features": 3, "dim2": 5}])
    result = _judge(interpreter_evaluator, task, seed_from_capture(capture))
    assert result.ok, result.message


def test_an_instancenorm_whose_channel_count_differs_from_num_features_gets_its_main_shape_builds(live_capture):
    """L2/28 normalises a (batch, 1, 1, features) view with InstanceNorm2d(features): the module's check warns (one
    channel, not ``num_features``), and ``warnings.warn`` is a function dynamo skips, so the single-graph static
    build failed and the GEMM builds with it; the task started from the shape-generic seed alone (on the H100,
    0.68x torch.compile, where the family's GEMM builds with the bf16 split run at 2-3x). Captured live."""
    capture = live_capture("L2/28", {"batch_size": 8, "in_features": 32, "out_features": 16})
    assert capture.main_failure == "" and capture.main is not None, capture.main_failure
    assert [v["name"] for v in capture.variants][:1] == ["triton-gemm"], [v["name"] for v in capture.variants]


def test_a_module_float_read_by_a_stateless_model_reaches_the_seed(live_capture, interpreter_evaluator):
    """LeakyReLU keeps ``negative_slope`` on a module with no parameters or buffers; the seed rebuilt the task's
    Model only where it had those, so the float Inductor reads was missing (on the H200: L1/20 and L1/36 raised
    AttributeError: 'ModelNew' object has no attribute 'negative_slope' / 'eps'). Captured live, as the coverage
    run does."""
    from evoforge.task import Task

    small = {"batch_size": 2, "dim": 8}
    capture = live_capture("L1/20", small)
    assert "L['self'].negative_slope" in capture.graph_inputs, capture.graph_inputs
    task = Task.load("L1/20", overrides=small, shapes=[{"dim": 5}])
    result = _judge(interpreter_evaluator, task, seed_from_capture(capture))
    assert result.ok, result.message


def test_a_scan_kernels_combine_function_travels_with_it(interpreter_evaluator):
    """Inductor writes a cumsum as ``tl.associative_scan`` with a combine function it defines beside the kernel
    (``_triton_helper_fn_add0``); the seed took the kernel alone, and the name was undefined (on the H200: L1/91
    and L1/92 compile_error). The combine function now travels with its kernel, renamed after it."""
    from evoforge.task import Task

    source = seed_from_capture(_capture("level1_92_cumsum_exclusive.cpu.json"))
    assert "_triton_helper_fn_add0(" in source and "def _triton_helper_fn_add0" not in source
    small = {"batch_size": 4, "input_shape": [64]}
    task = Task.load("L1/92", overrides=small, shapes=[{"batch_size": 3, "input_shape": [37]}])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_a_convolutions_channel_counts_stay_symbolic_in_a_vendor_seed(live_capture, interpreter_evaluator):
    """Inductor's convolution lowering guards the weight's sizes to constants, so the kernels after the
    convolution were written for the captured channel count (on the H200, under the vendor rule, 10 of 25
    level-2 tasks failed the chain's odd sizes: L2/24 wrote 24 channels where the odd size has 23). The capture
    keeps the convolution a plain call; captured live, as the coverage run does."""
    from evoforge.task import Task

    small = {"batch_size": 2, "in_channels": 3, "out_channels": 6, "D": 5, "H": 6, "W": 6}
    capture = live_capture("L2/24", small, allow_ops=("convolution",))
    assert not capture.gemm  # cuDNN allowed and kernels of Inductor's around it: no strict-rule build is made
    weight = [line for line in capture.output_code.splitlines() if "assert_size_stride(" in line and "(6, 3, 3, 3, 3)" in line]
    assert not weight, weight  # the weight's sizes are not literals where the graph takes its inputs
    source = seed_from_capture(capture, allow_ops=("convolution",))
    task = Task.load("L2/24", overrides=small, shapes=[{"out_channels": 5, "in_channels": 2, "W": 7}],
                     allow_ops=["convolution"])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message


def test_a_max_pool1d_length_stays_symbolic(live_capture, interpreter_evaluator):
    """``torch.max_pool1d`` reads the input's length as a plain integer, so dynamo specialised it and the seed's
    output length was the captured one (on the H200: L1/41 one element too long at the chain's odd length). The
    capture pools in 2-D with a height of one, which keeps the length symbolic; captured live."""
    from evoforge.task import Task

    small = {"batch_size": 2, "features": 4, "sequence_length": 64}
    capture = live_capture("L1/41", small)
    assert "L['x'].size()[2]" in capture.graph_inputs, capture.graph_inputs
    task = Task.load("L1/41", overrides=small, shapes=[{"sequence_length": 61}])
    result = _judge(interpreter_evaluator, task, seed_from_capture(capture))
    assert result.ok, result.message


def test_captures_side_by_side_share_the_cores_between_their_compile_pools(monkeypatch):
    """Each capture's Inductor would start a compile pool as wide as the machine; fourteen side by side on sixteen
    cores started two hundred processes importing torch. Side by side they split the cores; the user's own
    setting wins."""
    import os

    from evoforge.mutators.inductor_capture import capture_env

    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert capture_env(14)["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert capture_env(4)["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    assert capture_env(1)["TORCHINDUCTOR_COMPILE_THREADS"] == "16"
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "2")
    assert capture_env(14)["TORCHINDUCTOR_COMPILE_THREADS"] == "2"


def _hold_lock(path):
    """Another process holding the device's turn (an exclusive flock on ``path``) until its stdin closes."""
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys\n"
                               f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_captures_side_by_side_take_turns_to_time_their_autotuning(tmp_path):
    """Captures side by side compile at once but time one at a time, as evaluations do: an autotuning timed while
    seven others time theirs chooses under their load. The capture's process is told the device's lock (the one
    evaluations hold), and Inductor's own benchmarking (its ``benchmarker``, every GPU timing of an autotune) waits
    for it."""
    import threading

    from evoforge.backends.base import device_turn, device_turn_path
    from evoforge.mutators.inductor_capture import DEVICE_TURN_ENV, capture_env, take_turn_while_benchmarking
    from torch._inductor.runtime import benchmarking

    path = device_turn_path("test-device", str(tmp_path))
    assert capture_env(4, path)[DEVICE_TURN_ENV] == path
    assert DEVICE_TURN_ENV not in capture_env(4)
    previous = getattr(benchmarking, "_gpu_benchmark_lock_context", None)
    take_turn_while_benchmarking(path)
    try:
        holder = _hold_lock(path)
        entered = threading.Event()

        def bench():
            try:
                benchmarking.benchmarker.benchmark_gpu(lambda: entered.set(), warmup=1, rep=1)
            except Exception:  # noqa: BLE001  (no GPU here: what matters is when it starts)
                pass
            entered.set()

        t = threading.Thread(target=bench, daemon=True)
        t.start()
        # While another process holds the turn, the benchmark has not begun (a busy machine only delays it more).
        assert not entered.wait(1.0) and t.is_alive()
        holder.stdin.close()
        holder.wait(timeout=60)
        t.join(timeout=60)
        assert entered.is_set() and not t.is_alive()
        # In this process the evaluator's turn and the benchmarks' are one: a benchmark inside a held turn (the
        # judge's compile under its turn) goes on, where a second lock of the same file would wait forever.
        done = threading.Event()

        def nested():
            with device_turn("test-device", str(tmp_path)):
                try:
                    benchmarking.benchmarker.benchmark_gpu(lambda: None, warmup=1, rep=1)
                except Exception:  # noqa: BLE001
                    pass
            done.set()

        n = threading.Thread(target=nested, daemon=True)
        n.start()
        n.join(timeout=120)
        assert done.is_set()
    finally:
        if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
            benchmarking.set_gpu_benchmark_lock_context(previous)


# ------------------------------------------------------------------------------------------------ the main shape
# Captured with torch.compile's static build of the main shape beside the shape-generic one (``capture.main``), at
# the shapes the tests' tasks use as their main shape.
RELU_SMALL = {"batch_size": 4, "dim": 1000}
GEMM_SMALL = {"batch_size": 8, "in_features": 32, "out_features": 16, "bias_shape": [16]}


def test_a_main_shape_capture_gives_the_timed_shape_kernels_of_its_own():
    """The seed has two paths, as torch.compile keeps a build per shape: the main shape's kernels (sizes as
    constants) tuned through PARAMS, and the generic ones (Inductor's launch values written in) for other shapes."""
    capture = _capture("level1_19_ReLU.main.cpu.json")
    assert capture.main is not None and capture.main_capture().guards[0]["shape"] == [4, 1000]
    source = seed_from_capture(capture)
    assert static_check(source) is None
    model = source.split("class ModelNew")[1]
    main, generic = model.split("def forward_main_shape")[1].split("def forward_any_shape")
    assert "4000" in main and "PARAMS['XBLOCK']" in main  # the size a constant; the launch tuned
    assert "x.size()[0]" in generic and "PARAMS" not in generic  # symbolic, Inductor's choice written in
    space, params = declared_space(source)
    assert params["XBLOCK"] in space["XBLOCK"] and len(space["XBLOCK"]) > 1
    # Without its main capture the same capture is the generic seed alone, tuned.
    alone = seed_from_capture(InductorCapture(**{**capture.__dict__, "main": None}))
    assert "forward_main_shape" not in alone and "PARAMS['XBLOCK']" in alone


def test_each_path_runs_where_it_belongs_and_the_record_says_which(interpreter_evaluator, relu_task):
    """Through the chain: the main-shape kernels at every correctness run of the main shape, the generic ones at
    the extra shape; the result names the kernels that ran at each."""
    source = seed_from_capture(_capture("level1_19_ReLU.main.cpu.json"))
    result = _judge(interpreter_evaluator, relu_task, source)
    assert result.ok, result.message
    kernels = result.details["kernels"]
    assert kernels["main"] == ["triton_poi_fused_relu_0_main"], kernels
    extra = [names for label, names in kernels.items() if label.startswith("extra")]
    assert extra == [["triton_poi_fused_relu_0"]], kernels


def test_a_wrong_main_shape_path_fails_the_chain(interpreter_evaluator, relu_task):
    """The main-shape path is judged at every correctness run of the main shape (signed inputs too): an identity
    there, which rand's non-negative inputs cannot tell from ReLU, is incorrect."""
    source = seed_from_capture(_capture("level1_19_ReLU.main.cpu.json"))
    main, rest = source.split("def triton_poi_fused_relu_0_main", 1)
    body, after = rest.split("\n\n\n", 1)
    assert "maximum(tmp1, tmp0)" in body
    cheat = main + "def triton_poi_fused_relu_0_main" + body.replace("maximum(tmp1, tmp0)", "tmp0 + 0 * tmp1") \
        + "\n\n\n" + after
    result = _judge(interpreter_evaluator, relu_task, cheat)
    assert result.status.value == "incorrect" and "main shape" in result.message, result.message


def test_a_seed_without_its_generic_path_fails_the_chain(interpreter_evaluator, relu_task):
    """A main-shape path taken at every shape (a guard that always holds: sizes baked in, no generic path) is
    wrong at the chain's other shapes: the specialised path is no way around them."""
    source = seed_from_capture(_capture("level1_19_ReLU.main.cpu.json"))
    always = source.replace("if self._main_shape and self._main_state and", "if True or")
    assert always != source
    result = _judge(interpreter_evaluator, relu_task, always)
    assert not result.ok and "777" in result.message, result.message


def test_a_main_shape_seed_with_parameters_guards_them(interpreter_evaluator):
    """A GEMM with its weight from init inputs: the main path where the model was made at the main shape, the
    generic path at the chain's odd init sizes (in_features 31)."""
    from evoforge.task import Task

    capture = _capture("level2_76_Gemm_Add_ReLU.main.cpu.json")
    source = seed_from_capture(capture, allow_ops=("addmm",))
    assert "self.gemm.weight.shape == (16, 32)" in source
    task = Task.load("L2/76", overrides=GEMM_SMALL, allow_ops=["addmm"])
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message
    kernels = result.details["kernels"]
    assert kernels["main"] == ["triton_poi_fused_relu_0_main"]
    assert [v for k, v in kernels.items() if k.startswith("odd")] == [["triton_poi_fused_relu_0"]], kernels


def test_inductor_variants_are_other_structures_for_the_main_shape(interpreter_evaluator):
    """A task with a split reduction: the main shape's build with reductions unsplit, and with them looped, are
    kept where their kernels differ from the default's; each is a seed whose main path is that build, and it passes
    the chain."""
    from evoforge.task import Task

    capture = _capture("level1_96_HuberLoss.main.cpu.json")
    names = [v["name"] for v in capture.variants]
    assert names == ["unsplit-reductions", "looped-reductions"], names
    default = seed_from_capture(capture)
    task = Task.load("L1/96", overrides={"batch_size": 64, "input_shape": [4096]})
    for name in names:
        source = seed_from_capture(capture, variant=name)
        assert source != default and static_check(source) is None
        result = _judge(interpreter_evaluator, task, source)
        assert result.ok, (name, result.message)
        assert all(k.endswith("_main") for k in result.details["kernels"]["main"]), result.details["kernels"]
    with pytest.raises(NoInductorSeed, match="no Inductor variant 'tiled'"):
        seed_from_capture(capture, variant="tiled")


def test_a_convolutions_reference_layout_is_a_variant_of_its_own(interpreter_evaluator):
    """The default static build lays a convolution out channels-last (Inductor's layout optimisation), which cuDNN
    may run in TF32 (on the H200 L2/87's failed the chain's float64 criterion) and which elsewhere is the faster
    build (L2/31, 35, 93 passed at 1.4-1.6x the reference's layout): the seed keeps torch.compile's default, and the
    build in the reference's layout is a variant; both pass the chain here."""
    from evoforge.task import Task

    capture = _capture("level2_87_Conv2d_Subtract_Subtract_Mish.main.cpu.json")
    assert [v["name"] for v in capture.variants] == ["reference-layout"]
    assert capture.variants[0]["config"] == {"layout_optimization": False}
    task = Task.load("L2/87", overrides={"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 16,
                                         "width": 16}, allow_ops=["convolution"])
    for variant in ("", "reference-layout"):
        result = _judge(interpreter_evaluator, task, seed_from_capture(capture, allow_ops=("convolution",),
                                                                       variant=variant))
        assert result.ok, (variant, result.message)


def test_a_gemm_task_starts_in_triton_alone_under_the_strict_rule(interpreter_evaluator):
    """Where torch.compile calls cuBLAS (L2/76's addmm), the capture compiles the task again with every GEMM in
    Inductor's max-autotune Triton template, the epilogue fused: under the strict rule that build is the seed, no
    vendor call in it, its tiles and fp32 dot precision in SPACE, and both its paths pass the chain."""
    from evoforge.task import Task

    capture = _capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json")
    assert capture.gemm is not None
    source = seed_from_capture(capture)
    assert "torch.addmm" not in source and "torch.mm" not in source and "extern_kernels" not in source
    assert static_check(source) is None
    space, params = declared_space(source)
    assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PRECISION"} <= set(space), space
    assert params["PRECISION"] == "ieee" and space["PRECISION"] == ["ieee", "tf32x3", "bf16x3-split"]
    # Inductor wrote the K loop unmasked (K = 32 divides by its BLOCK_K): every BLOCK_K offered divides K.
    assert space["BLOCK_K"] and all(32 % k == 0 and k >= 16 for k in space["BLOCK_K"]), space["BLOCK_K"]
    task = Task.load("L2/76", overrides=GEMM_SMALL)
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message
    kernels = result.details["kernels"]
    assert kernels["main"] and all(k.startswith("triton_tem_") and k.endswith("_main") for k in kernels["main"]), kernels
    odd = [v for k, v in kernels.items() if k.startswith("odd")]
    assert odd and all(name.startswith("triton_tem_") and not name.endswith("_main") for v in odd for name in v), kernels


def test_a_gemm_templates_tiles_move_and_stay_correct(interpreter_evaluator):
    """The search's moves on the template: other tiles, GROUP_M and three TF32 passes compute the same GEMM."""
    from evoforge.task import Task

    source = seed_from_capture(_capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json"))
    task = Task.load("L2/76", overrides=GEMM_SMALL)
    space, params = declared_space(source)
    moved = dict(params, BLOCK_M=max(space["BLOCK_M"]), BLOCK_N=min(space["BLOCK_N"]), BLOCK_K=min(space["BLOCK_K"]),
                 GROUP_M=1, PRECISION="tf32x3")
    result = interpreter_evaluator.evaluate(task, Candidate.from_source(source, task=task.name,
                                                                        operator="inductor-seed", params=moved))
    assert result.ok, result.message


def test_the_split_path_computes_the_gemm_from_bf16_parts(interpreter_evaluator):
    """PRECISION "bf16x3-split": the template's fp32 operands split once into bf16 hi and lo parts before the GEMM
    and three products per K step (on the H200 a split done once ran a 4096^2 GEMM at 0.79 ms against 1.69 ms for
    Triton's in-loop tf32x3). The seed offers it beside Inductor's dot, both paths pass the chain with it (the main
    shape's tuned path and, unchanged, the generic one), and any other PRECISION compiles Inductor's dot alone."""
    from evoforge.mutators.inductor_seed import SPLIT_PRECISION

    from evoforge.task import Task

    source = seed_from_capture(_capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json"))
    space, params = declared_space(source)
    assert space["PRECISION"] == ["ieee", "tf32x3", SPLIT_PRECISION], space
    assert params["PRECISION"] != SPLIT_PRECISION  # not the start on the interpreter
    assert "_bf16_parts(" in source and "arg_A_lo" in source
    assert static_check(source) is None
    task = Task.load("L2/76", overrides=GEMM_SMALL)
    for moved in (dict(params, PRECISION=SPLIT_PRECISION),
                  dict(params, PRECISION=SPLIT_PRECISION, BLOCK_M=min(space["BLOCK_M"]), BLOCK_K=min(space["BLOCK_K"]))):
        result = interpreter_evaluator.evaluate(task, Candidate.from_source(source, task=task.name,
                                                                            operator="inductor-seed", params=moved))
        assert result.ok, result.message


def test_the_bmm_templates_pointer_form_splits_too(interpreter_evaluator):
    """Inductor's bmm template walks its operands by pointer (``A = A + (...)``, ``A += BLOCK_K * stride_ak``, loads
    of ``A`` masked or not): each step has its lo twin, and the split computes the batched GEMM (on the H200 the
    bmm task L1/3's seed could not take the split before; 128x128x64 tiles at tf32x3 there ran 0.75x)."""
    from evoforge.mutators.inductor_seed import SPLIT_PRECISION

    from evoforge.task import Task

    source = seed_from_capture(_capture("level1_3_Batched_matrix_multiplication.cpu.json"))
    assert "A_LO = A_LO + (" in source and "A_LO += BLOCK_K * stride_ak" in source
    space, params = declared_space(source)
    assert SPLIT_PRECISION in space["PRECISION"], space
    task = Task.load("L1/3", overrides={"batch_size": 2, "m": 32, "k": 48, "n": 16})
    result = interpreter_evaluator.evaluate(task, Candidate.from_source(
        source, task=task.name, operator="inductor-seed", params=dict(params, PRECISION=SPLIT_PRECISION)))
    assert result.ok, result.message


def test_a_split_that_drops_the_lo_parts_fails_the_chain(interpreter_evaluator):
    """Adversarial: the split path with one product (hi*hi, bf16's 8 bits) is one bf16 GEMM, about 1e-3 relative:
    the chain must reject it, so the three products are what passes, not a tolerance wide enough for anything."""
    from evoforge.mutators.inductor_seed import SPLIT_PRECISION

    from evoforge.task import Task

    source = seed_from_capture(_capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json"))
    lossy = source.replace("part = tl.dot(a_lo, b, out_dtype=tl.float32)", "part = tl.zeros_like(acc)")
    lossy = lossy.replace("part = tl.dot(a, b_lo, part, out_dtype=tl.float32)", "part = part")
    assert lossy != source
    task = Task.load("L2/76", overrides=GEMM_SMALL)
    _, params = declared_space(source)
    result = interpreter_evaluator.evaluate(task, Candidate.from_source(
        lossy, task=task.name, operator="inductor-seed", params=dict(params, PRECISION=SPLIT_PRECISION)))
    assert not result.ok and result.status == "incorrect", result.message


def test_a_template_whose_unmasked_k_loop_would_overrun_offers_no_such_block_k():
    """Adversarial: a BLOCK_K that does not divide K would read past the rows of an unmasked K loop; such a value
    is never in SPACE, while a template Inductor wrote with masks (EVEN_K False) takes any."""
    capture = _capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json")
    main = json.loads(json.dumps(capture.gemm["main"]))
    code = main["output_code"]
    assert "K = 32" in code and "BLOCK_K : tl.constexpr = 32" in code
    main["output_code"] = code.replace("K = 32", "K = 96")  # 16 and 32 divide it, 64 and 128 do not
    variant = InductorCapture(**{k: v for k, v in main.items() if k in InductorCapture.__dataclass_fields__})
    space, _ = declared_space(seed_from_capture(variant))
    assert space["BLOCK_K"] == [16, 32], space["BLOCK_K"]
    main["output_code"] = code.replace("EVEN_K : tl.constexpr = True", "EVEN_K : tl.constexpr = False")
    variant = InductorCapture(**{k: v for k, v in main.items() if k in InductorCapture.__dataclass_fields__})
    space, _ = declared_space(seed_from_capture(variant))
    assert 64 in space["BLOCK_K"] or max(space["BLOCK_K"]) > 32, space["BLOCK_K"]


def test_with_the_vendor_gemm_allowed_the_triton_gemm_is_a_variant(interpreter_evaluator):
    """Under the vendor rule the seed keeps cuBLAS (torch.compile's default) and the Triton template's build of the
    main shape is an ``inductor-variant`` beside it; it passes the chain too."""
    from evoforge.task import Task

    capture = _capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json")
    assert [v["name"] for v in capture.variants] == ["triton-gemm"]
    seed = seed_from_capture(capture, allow_ops=("addmm",))
    assert "torch.addmm" in seed
    variant = seed_from_capture(capture, allow_ops=("addmm",), variant="triton-gemm")
    assert "torch.addmm" in variant.split("def forward_main_shape")[0] + variant.split("def forward_any_shape")[1]
    assert "torch.addmm" not in variant.split("def forward_main_shape")[1].split("def forward_any_shape")[0]
    task = Task.load("L2/76", overrides=GEMM_SMALL, allow_ops=["addmm"])
    result = _judge(interpreter_evaluator, task, variant)
    assert result.ok, result.message


def test_the_gemm_build_starts_from_tiles_tuned_for_three_tf32_passes(interpreter_evaluator):
    """The GEMM build is autotuned with its templates' dot written as three TF32 passes, the dot the seed starts
    with, so Inductor's choice of tiles is the one for that dot (tuned for the exact dot or one TF32 pass, the H200
    seeds ran three passes on tiles chosen for another: L1/1 0.32x, L2/12 0.92x torch.compile). The build tuned for
    the exact dot is a variant under the strict rule (its main path beside the GEMM build's generic one); the plain
    GEMM build is the strict seed itself, not a variant of it. On CUDA the bf16 splits are in SPACE too, never
    the start, and never on the interpreter, which has none."""
    from evoforge.task import Task

    data = json.loads((CAPTURES / "level2_9_Matmul_Subtract_Multiply_ReLU.gemm.cpu.json").read_text())
    assert [v["name"] for v in data["variants"]] == ["triton-gemm", "triton-gemm-exact-tiles"]
    tuned = data["variants"][0]["main"]["output_code"]
    assert 'input_precision="tf32x3"' in tuned and "allow_tf32=ALLOW_TF32" not in tuned
    assert 'input_precision="tf32x3"' in data["gemm"]["output_code"]  # the generic path (odd shapes) too
    capture = InductorCapture.from_json(json.dumps(data))
    seed = seed_from_capture(capture)
    assert "torch.mm" not in seed and "torch.addmm" not in seed
    main_kernels = [k for k in seed.split("@triton.jit") if "_main(" in k.split("\n", 2)[1]]
    assert main_kernels and any("input_precision=PRECISION" in k for k in main_kernels), seed
    space, params = declared_space(seed)
    assert params["PRECISION"] == "tf32x3" and space["PRECISION"] == ["ieee", "tf32x3", "bf16x3-split"]
    with pytest.raises(NoInductorSeed):
        seed_from_capture(capture, variant="triton-gemm")
    exact = seed_from_capture(capture, variant="triton-gemm-exact-tiles")
    assert exact != seed and "torch.mm" not in exact and "torch.addmm" not in exact
    assert declared_space(exact)[1]["PRECISION"] == "ieee"  # a CPU capture: Inductor's exact dot as it chose
    task = Task.load("L2/9", overrides={"batch_size": 8, "in_features": 32, "out_features": 16})
    for source in (seed, exact):
        result = _judge(interpreter_evaluator, task, source)
        assert result.ok, result.message
    for built in (data["main"], data["gemm"], data["gemm"]["main"], *(v["main"] for v in data["variants"])):
        if built:
            built["device"] = "cuda"
    on_cuda = InductorCapture.from_json(json.dumps(data))
    for source in (seed_from_capture(on_cuda), seed_from_capture(on_cuda, variant="triton-gemm-exact-tiles")):
        space, params = declared_space(source)
        assert params["PRECISION"] == "tf32x3", params
        assert space["PRECISION"] == ["ieee", "tf32x3", "bf16x3", "bf16x6", "bf16x3-split"], space


def test_only_fp32_gemms_are_written_as_three_tf32_passes_and_the_templates_are_restored():
    """Adversarial: a bf16 model's dot keeps its own precision (three TF32 passes mean nothing for bf16 operands),
    and after the build Inductor's templates render as Inductor wrote them (a later compile in the same process,
    the exact-tiles variant's, must not inherit the rewrite)."""
    import torch
    from evoforge.mutators.inductor_capture import _fp32_only, _tf32x3_dots
    from torch._inductor.select_algorithm import TritonTemplate

    linear = torch.nn.Linear(4, 4)
    assert _fp32_only(linear, [torch.ones(2, 4)])
    assert not _fp32_only(linear.to(torch.bfloat16), [torch.ones(2, 4, dtype=torch.bfloat16)])
    assert not _fp32_only(torch.nn.Linear(4, 4), [torch.ones(2, 4, dtype=torch.float16)])
    before = dict(TritonTemplate.all_templates)
    with _tf32x3_dots(True):
        assert "mm" in TritonTemplate.all_templates
        assert all(hasattr(t.template, "inner") for t in TritonTemplate.all_templates.values())
        assert torch.backends.cuda.matmul.allow_tf32
    assert all(not hasattr(t.template, "inner") for t in TritonTemplate.all_templates.values())
    assert not torch.backends.cuda.matmul.allow_tf32
    assert all(TritonTemplate.all_templates[name] is t for name, t in before.items())


def test_a_gemm_whose_k_dwarfs_m_and_n_still_gets_a_template_main_path(live_capture, interpreter_evaluator):
    """Where K is 32x M and N or more (L1/6), Inductor offers its decompose-K choice instead of the GEMM template
    and, on this machine, no choice at all: the GEMM build is made once more with the template offered, so the
    strict seed has its main shape's tuned path (before: the shape-generic kernels alone, Inductor's launch written
    in; on the H200 L1/6 ran at 0.05x torch.compile)."""
    from evoforge.task import Task

    small = {"M": 16, "N": 16, "K": 1024}
    capture = live_capture("L1/6", small)
    assert "triton-gemm" in [v["name"] for v in capture.variants], capture.variants
    source = seed_from_capture(capture)
    assert "def forward_main_shape" in source and "torch.mm" not in source
    space, params = declared_space(source)
    assert {"BLOCK_M", "BLOCK_K", "PRECISION", "SPLIT_K"} <= set(space), space
    assert params["SPLIT_K"] == 1 and {2, 4, 8, 16, 32, 64} <= set(space["SPLIT_K"]), space  # a CPU: no SMs to fill
    task = Task.load("L1/6", overrides=small)
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message
    # K split over programs, each adding its partial sum into the zeroed output: the same GEMM, at the main shape
    # and (the generic path) at the odd ones; at 64 splits of K = 1024 some splits get one BLOCK_K step, or none.
    for split in (4, 64):
        moved = interpreter_evaluator.evaluate(task, Candidate.from_source(
            source, task=task.name, operator="inductor-seed", params=dict(params, SPLIT_K=split, BLOCK_K=16)))
        assert moved.ok, moved.message


def test_split_k_starts_where_the_output_tiles_leave_the_gpu_idle_and_never_after_an_epilogue():
    """SPLIT_K's start fills the capturing GPU's multiprocessors where the output tiles alone cannot (on the H200 L1/6,
    a 256x256 output over K = 524288 in 32 tiles, ran 0.11x torch.compile); a GEMM with many tiles starts at 1.
    Adversarial: a template with an epilogue fused after the GEMM (L2/76's add and ReLU) must not split K, since
    ReLU of a partial sum is not a partial sum of the ReLU."""
    from evoforge.mutators.inductor_seed import _split_k_start

    info = {"M": 256, "N": 256, "K": 524288, "tiles": {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32}}
    assert _split_k_start(info, 132) == 8 and _split_k_start(info, 0) == 1
    assert _split_k_start(dict(info, M=4096, N=4096), 132) == 1
    assert _split_k_start(dict(info, K=256), 132) == 1  # eight BLOCK_K steps in all: nothing to split
    fused = seed_from_capture(_capture("level2_76_Gemm_Add_ReLU.gemm.cpu.json"))
    assert "SPLIT_K" not in declared_space(fused)[0] and "atomic_add" not in fused


def test_the_gemm_builds_are_the_first_variants_a_campaign_evaluates(live_capture):
    """A task with a GEMM and a reduction has variants of both kinds; the GEMM builds come first, as a campaign
    evaluates them in the capture's order (on the H200 a 3.5-minute campaign of ten tasks made three evaluations
    each, and on L2/55 and L2/84 the reduction variants took them: the GEMM build, 1.6x elsewhere, never ran)."""
    small = {"batch_size": 8, "in_features": 32, "out_features": 16}
    names = [v["name"] for v in live_capture("L2/55", small, ("addmm",)).variants]
    assert names[:2] == ["triton-gemm", "triton-gemm-exact-tiles"] and len(names) > 2, names
    # Under the strict rule a reduction variant still calls cuBLAS: it is not compiled (it could only start as the
    # GEMM build's shape-generic path alone, and its compile cost set-up time); the GEMM builds are all there is.
    strict = live_capture("L2/55", small)
    assert [v["name"] for v in strict.variants] == ["triton-gemm", "triton-gemm-exact-tiles"], strict.variants
    source = seed_from_capture(strict)
    assert "def forward_main_shape" in source and "torch.addmm" not in source


_COUNT_AUTOTUNES = """
import json, sys
from torch._dynamo.utils import counters
from evoforge.mutators import inductor_capture
capture = inductor_capture.capture(sys.argv[1], overrides=json.loads(sys.argv[2]), device="cpu")
print(json.dumps({"autotunes": counters["inductor"]["select_algorithm_autotune"],
                  "variants": [v["name"] for v in capture.variants], "gemm": bool(capture.gemm)}))
"""


def test_the_gemm_builds_shape_generic_compile_autotunes_nothing(tmp_path):
    """Under the strict rule a GEMM task's capture autotunes Inductor's template once per main-shape build (the
    two GEMM variants), not for the shape-generic build as well: its kernels run only at the chain's other shapes,
    and each autotuning takes the device's turn (on the H100 the captures of 14 GEMM tasks had not all finished
    after 960 s). Counted by Inductor's own counter in a capture process of its own."""
    import os
    import subprocess
    import sys

    from evoforge.task import resolve_task_path

    proc = subprocess.run([sys.executable, "-c", _COUNT_AUTOTUNES, str(resolve_task_path("L2/55")),
                           json.dumps({"batch_size": 8, "in_features": 32, "out_features": 16})],
                          capture_output=True, text=True, timeout=900,
                          # a cache of its own: no autotuning read back from an earlier capture's
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["gemm"] and seen["variants"] == ["triton-gemm", "triton-gemm-exact-tiles"], seen
    assert seen["autotunes"] == 2, seen


def test_dropouts_seed_draw_is_no_vendor_call_and_the_task_starts_under_the_strict_rule(live_capture, interpreter_evaluator):
    """L2/66 (Matmul, Dropout, Softmax): Inductor draws its dropout's seed with ``aten.randint.low_out`` from torch's
    generator; that draw was taken for a vendor call, so the task had no seed under the strict rule (nor under the
    issue-R sample's vendor rule of GEMM and convolution ops). It is no compute: the seed keeps it and passes the
    chain. Adversarial: a candidate that draws with randint and leaves its compute to torch is still refused."""
    from evoforge.task import Task

    small = {"batch_size": 8, "in_features": 32, "out_features": 16}
    capture = live_capture("L2/66", small)
    assert "randint" in capture.output_code
    source = seed_from_capture(capture)
    assert "torch.ops.aten.randint.low_out" in source and "torch.addmm" not in source
    task = Task.load("L2/66", overrides=small)
    result = _judge(interpreter_evaluator, task, source)
    assert result.ok, result.message
    cheat = task.source + '''
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


class ModelNew(Model):
    def forward(self, x):
        torch.randint(0, 10, (1,), device=x.device)
        y = super().forward(x).contiguous()
        out = torch.empty_like(y)
        _copy[(triton.cdiv(y.numel(), 256),)](y, out, y.numel(), BLOCK=256)
        return out
'''
    refused = _judge(interpreter_evaluator, task, cheat)
    assert not refused.ok and "addmm" in refused.message, refused.message


def _per_dim(v, dims):
    """A convolution argument as torch's functional form takes it (an int or a tuple), as aten's list per dimension."""
    return list(v) if isinstance(v, tuple) else [v] * dims


@pytest.mark.parametrize("dims,stride,padding,dilation,groups", [
    (1, 3, 0, 4, 1), (1, 1, 2, 1, 2), (2, 1, 0, 1, 1), (2, 2, 1, 2, 3), (2, 1, 1, 1, 6), (3, (1, 2, 1), (1, 0, 2), 1, 1),
])
def test_a_convolution_as_a_window_gather_and_a_gemm_is_the_convolution(dims, stride, padding, dilation, groups):
    """The decomposition the strict rule's convolution build compiles (``_conv_as_gemm``), against torch's own
    convolution in float64: 1-D, 2-D and 3-D; strided, padded, dilated; grouped and depthwise; with and without a
    bias."""
    import torch
    from evoforge.mutators.inductor_capture import _conv_as_gemm

    g = torch.Generator().manual_seed(dims * 7 + groups)
    size = {1: (23,), 2: (9, 11), 3: (6, 7, 8)}[dims]
    kernel = {1: (3,), 2: (3, 2), 3: (2, 3, 3)}[dims]
    x = torch.randn(2, 6, *size, generator=g, dtype=torch.float64)
    w = torch.randn(12, 6 // groups, *kernel, generator=g, dtype=torch.float64)

    for bias in (None, torch.randn(12, generator=g, dtype=torch.float64)):
        got = _conv_as_gemm(x, w, bias, _per_dim(stride, dims), _per_dim(padding, dims), _per_dim(dilation, dims), False, [0] * dims, groups)
        conv = getattr(torch.nn.functional, f"conv{dims}d")
        want = conv(x, w, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
        assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dims,stride,padding,output_padding,dilation,groups", [
    (1, 3, 0, 0, 1, 1), (1, 2, 1, 1, 2, 2), (2, 1, 0, 0, 1, 1), (2, 2, 1, 1, 1, 3), (2, (2, 3), (2, 0), (1, 2), 2, 1),
    (2, 2, 3, 0, 1, 6), (3, (1, 2, 2), (0, 1, 2), (0, 1, 0), 1, 2), (3, 2, 1, 1, (1, 2, 1), 1),
    (1, 2, 0, 1, 3, 1), (1, 3, 4, 2, 2, 1), (2, (4, 2), (5, 1), (3, 0), (2, 3), 2), (1, 5, 0, 0, 1, 1),
])
def test_a_transposed_convolution_as_a_gather_and_a_gemm_is_the_transposed_convolution(dims, stride, padding,
                                                                                       output_padding, dilation,
                                                                                       groups):
    """A transposed convolution in the strict build (``_conv_as_gemm`` with ``transposed``: one plain convolution per
    output phase, each of the phase's taps flipped, their channels swapped per group, then interleaved),
    against torch's own in float64: 1-D, 2-D and 3-D; strided (unequal strides too), padded past the kernel's reach
    (a crop), output padding, dilated, grouped and depthwise; with and without a bias. Inductor has no Triton for it:
    before, every transposed-convolution task had no seed under the strict rule (issue U)."""
    import torch
    from evoforge.mutators.inductor_capture import _conv_as_gemm

    g = torch.Generator().manual_seed(dims * 11 + groups)
    size = {1: (13,), 2: (7, 9), 3: (4, 5, 6)}[dims]
    kernel = {1: (3,), 2: (3, 4), 3: (3, 3, 2)}[dims]
    x = torch.randn(2, 6, *size, generator=g, dtype=torch.float64)
    w = torch.randn(6, 12 // groups, *kernel, generator=g, dtype=torch.float64)

    for bias in (None, torch.randn(12, generator=g, dtype=torch.float64)):
        got = _conv_as_gemm(x, w, bias, _per_dim(stride, dims), _per_dim(padding, dims), _per_dim(dilation, dims), True,
                            _per_dim(output_padding, dims), groups)
        conv = getattr(torch.nn.functional, f"conv_transpose{dims}d")
        want = conv(x, w, bias, stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                    dilation=dilation)
        assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_strided_transposed_convolution_multiplies_no_inserted_zero():
    """The strict build's transposed convolution does the multiply-adds of the transposed convolution itself, not
    ``stride ** dims`` times more on zeros spread between the inputs (the gather form before: 8x for a stride-2
    3-D convolution, KernelBench's L2/100 ran at 0.07x torch.compile): its GEMMs' FLOPs, counted by torch's own
    counter, within 1.5x of the transposed convolution's."""
    import torch
    from evoforge.mutators.inductor_capture import _conv_as_gemm
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(2, 8, 10, 10, 10, dtype=torch.float64)
    w = torch.randn(8, 4, 3, 3, 3, dtype=torch.float64)
    with FlopCounterMode(display=False) as ours:
        _conv_as_gemm(x, w, None, [2] * 3, [1] * 3, [1] * 3, True, [1] * 3, 1)
    with FlopCounterMode(display=False) as torchs:
        torch.nn.functional.conv_transpose3d(x, w, None, stride=2, padding=1, output_padding=1)
    assert ours.get_total_flops() <= 1.5 * torchs.get_total_flops()


def test_a_transposed_convolution_task_starts_under_the_strict_rule(live_capture, interpreter_evaluator):
    """A transposed convolution (Inductor has no Triton for it: cuDNN's, under every build) starts under the strict
    rule from the gather form: captured live and judged by the chain, odd shapes included. L1/79: 1-D, strided,
    padded and dilated."""
    from evoforge.task import Task

    small = {"batch_size": 1, "in_channels": 2, "out_channels": 3, "length": 7}  # small: the capture autotunes
    capture = live_capture("L1/79", small)
    with pytest.raises(NoInductorSeed, match="convolution|library calls only"):  # the default: cuDNN
        _seed(capture)
    source = seed_from_capture(capture)
    assert "convolution(" not in source
    result = _judge(interpreter_evaluator, Task.load("L1/79", overrides=small), source)
    assert result.ok, result.message


def test_convolution_tasks_start_under_the_strict_rule_as_window_gathers_and_gemms(live_capture, interpreter_evaluator):
    """Where Inductor calls cuDNN for a convolution, the strict rule's build decomposes it into Inductor's Triton:
    each output's input window gathered, then its GEMM template. Before, no convolution task had a seed under the
    strict rule (issue U). Captured live, judged by the chain (odd shapes included): a dilated, strided 1-D
    convolution and a depthwise (grouped) 2-D one."""
    from evoforge.task import Task

    for spec, small in (("L1/76", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "length": 40}),
                        ("L1/82", {"batch_size": 2, "in_channels": 3, "width": 9, "height": 9})):
        capture = live_capture(spec, small)
        assert "convolution" in capture.output_code
        with pytest.raises(NoInductorSeed, match="convolution|library calls only"):  # the default: cuDNN
            _seed(capture)
        source = seed_from_capture(capture)
        assert "torch.convolution" not in source and "aten.convolution" not in source
        result = _judge(interpreter_evaluator, Task.load(spec, overrides=small), source)
        assert result.ok, (spec, result.message)
    # With cuDNN's convolution allowed, a task that is one convolution (Inductor writes no kernel of its own
    # around it) starts from the same build: there is no other.
    allowed = live_capture("L1/76", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "length": 40},
                           allow_ops=("convolution",))
    assert allowed.gemm and "torch.convolution" not in seed_from_capture(allowed, allow_ops=("convolution",))
