"""The shape rules that start a GEMM's search beside its seed (knowledge/starts.py), and a campaign that uses them."""

from __future__ import annotations

import json

import optuna
import pytest
from evoforge.knowledge.starts import (
    SPLIT_PRECISION,
    SPLIT_TILE,
    gemm_problem,
    shape_starts,
    sm_count,
    split_starts,
)

from evoforge import knowledge
from evoforge.core import declared_space
from tests.conftest import cli_main

ARCH = "nvidia-sm90"


def _template(name):
    source = knowledge.template_source(name)
    space, params = declared_space(source)
    return source, space, params


def _starts(name, shapes, elem_bytes=2):
    source, space, params = _template(name)
    return params, shape_starts(space, params, shapes, ARCH, source=source, elem_bytes=elem_bytes)


def test_a_gemm_with_fewer_output_tiles_than_sms_starts_on_stream_k():
    # L1/6's shape in bf16: 2 tiles of 128x256 for 132 SMs, K = 524288 (the seed ran at 3% of cuBLAS there)
    params, starts = _starts("cute_gemm_bf16_sm90", [(256, 524288), (524288, 256)])
    assert sm_count(ARCH) == 132
    assert [s.params["REDUCTION"] for s in starts] == ["nondeterministic", "deterministic"]
    for s in starts:
        assert s.params["TILES"] == "streamk" and (s.params["TILE_M"], s.params["TILE_N"]) == (128, 128)
        assert (s.params["CLUSTER_M"], s.params["CLUSTER_N"]) == (1, 1)
        assert set(s.change) <= set(params) and all(params[k] != v for k, v in s.change.items())
        assert knowledge.is_legal(s.params, ARCH, source=_template("cute_gemm_bf16_sm90")[0], elem_bytes=2)[0]
        assert "2 output tiles" in s.why and "132 SMs" in s.why


def test_a_triton_gemm_with_fewer_output_tiles_than_sms_starts_split_k():
    # L1/6 in fp32 on the matmul template: 4 tiles of 128x128 for 132 SMs, K = 524288 (the template ran 0.12x
    # torch.compile there with no split: 4 of 132 SMs busy)
    params, starts = _starts("matmul", [(256, 524288), (524288, 256)], elem_bytes=None)  # as the route judges
    assert params["SPLIT_K"] == 1
    split = [s for s in starts if "SPLIT_K" in s.change]
    assert [s.change for s in split] == [{"SPLIT_K": 64}]  # the fewest splits giving every SM a program (4 x 64)
    assert "4 output tiles of 128x128 for 132 SMs" in split[0].why


@pytest.mark.parametrize("shapes", [
    [(4096, 4096), (4096, 4096)],            # 1024 tiles: every SM busy without a split
    [(256, 256), (256, 256)],                # few tiles, but 4 K tiles: too short to split
    [(256, 524288)],                         # one input
])
def test_no_split_k_start_where_the_rule_does_not_hold(shapes):
    _, starts = _starts("matmul", shapes, elem_bytes=None)
    assert not any("SPLIT_K" in s.change for s in starts)


@pytest.mark.parametrize("shapes", [
    [(4096, 4096), (4096, 4096)],            # 512 tiles: whole waves, the seed's own schedule
    [(2048, 8192), (8192, 4096)],            # L1/2: 256 tiles
    [(256, 64), (64, 256)],                  # few tiles but a short K: nothing to split
    [(8, 256, 524288), (8, 524288, 256)],    # batched: not two matrices
    [(256, 524288), (524287, 256)],          # inner sizes differ: not a GEMM
    [(256, 524288)],                         # one input
])
def test_no_stream_k_start_where_the_rule_does_not_hold(shapes):
    _, starts = _starts("cute_gemm_bf16_sm90", shapes)
    assert not any(s.params.get("TILES") == "streamk" for s in starts)


def test_a_k_shorter_than_the_k_tile_starts_on_a_tile_within_k():
    _, starts = _starts("cute_gemm_bf16_sm90", [(32768, 32), (32, 32768)])  # L1/9's shape
    assert [s.change for s in starts] == [{"TILE_K": 32}]
    _, starts = _starts("matmul", [(4096, 32), (32, 4096)], elem_bytes=4)  # a Triton template: BLOCK_K
    assert [s.change for s in starts] == [{"BLOCK_K": 32}]
    # no SPACE value fits within K: no start (the seed's masked K loop is the only way)
    _, starts = _starts("matmul", [(4096, 16), (16, 4096)], elem_bytes=4)
    assert starts == []


def _split_space(prefix="", tile=True):
    space = {f"{prefix}BLOCK_M": [32, 64, 128], f"{prefix}BLOCK_N": [32, 64, 128], f"{prefix}BLOCK_K": [16, 32, 64],
             f"{prefix}num_warps": [2, 4, 8], f"{prefix}num_stages": [1, 2, 3, 4],
             f"{prefix}PRECISION": ["ieee", "tf32x3", "bf16x3", SPLIT_PRECISION]}
    if not tile:
        space[f"{prefix}BLOCK_K"] = [16, 32]  # K = 32 with an unmasked K loop: no 64-deep K tile
    params = {f"{prefix}BLOCK_M": 32, f"{prefix}BLOCK_N": 32, f"{prefix}BLOCK_K": 16, f"{prefix}num_warps": 2,
              f"{prefix}num_stages": 2, f"{prefix}PRECISION": "tf32x3"}
    return space, params


@pytest.mark.parametrize("prefix", ["", "k1_"])
def test_an_fp32_gemm_template_that_can_split_starts_on_the_split_at_its_tiles_and_at_the_split_tile(prefix):
    """On the H200 the split ran 1.8-3.5x torch.compile where the seed's in-loop tf32x3 ran 0.93-1.66x: both the
    split at the seed's tiles and at SPLIT_TILE are tried beside the seed (a seed of several kernels: the GEMM's
    own keys)."""
    space, params = _split_space(prefix)
    starts = split_starts(space, params, ARCH)
    assert [s.change for s in starts] == [
        {f"{prefix}PRECISION": SPLIT_PRECISION},
        {f"{prefix}PRECISION": SPLIT_PRECISION, **{prefix + k: v for k, v in SPLIT_TILE.items()}}]
    assert all(knowledge.is_legal(s.params, ARCH)[0] for s in starts)


def test_no_split_start_where_it_is_the_start_or_not_offered_and_no_part_of_the_tile():
    """Adversarial: a seed already on the split, a template that cannot split (a bf16 GEMM, a bmm whose loads the
    split does not recognise), and a SPACE that offers only part of the tile (a 128x128 tile at a 32-deep K was
    never measured: not offered as the split tile)."""
    space, params = _split_space()
    assert split_starts(space, {**params, "PRECISION": SPLIT_PRECISION}, ARCH) == []
    assert split_starts({**space, "PRECISION": ["ieee", "tf32x3"]}, params, ARCH) == []
    space, params = _split_space(tile=False)
    assert [s.change for s in split_starts(space, params, ARCH)] == [{"PRECISION": SPLIT_PRECISION}]


def test_gemm_problem_reads_m_n_k():
    assert gemm_problem([(3, 5), (5, 7)]) == (3, 7, 5)
    assert gemm_problem([(3, 5), (6, 7)]) is None
    assert gemm_problem([(3, 5, 1), (5, 7)]) is None


def _trials(out, study):
    return optuna.load_study(study_name=study, storage=f"sqlite:///{out}/optuna.db").trials


@pytest.mark.slow
def test_a_campaign_evaluates_the_knowledge_start_beside_the_seed_and_not_with_the_kb_off(tmp_path, capsys, caplog):
    # L1/1 at N=32 on the interpreter: K=32 is shorter than the template's 64-deep K tile
    common = ["--task", "L1/1", "--set", "N=32", "--backend", "interpreter", "--budget-evals", "3",
              "--operators", "params", "--workers", "1", "--json"]
    out = tmp_path / "kb"
    proc = cli_main(capsys, "run", *common, "--out", str(out), "--name", "kb")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Said as a warning (on the command's stderr; in this process pytest holds the log records).
    assert any(r.levelname == "WARNING" and "the knowledge base starts a config beside the seed: K=32" in r.getMessage()
               for r in caplog.records)
    trials = _trials(out, "kb/level1/1_Square_matrix_multiplication_")
    ops = [t.user_attrs["operator"] for t in trials]
    assert ops[0] == "seed" and ops[1] == "knowledge-start", ops
    start = trials[1]
    assert json.loads(start.user_attrs["params"])["BLOCK_K"] == 32 and start.user_attrs["status"] == "ok"
    assert json.loads(trials[0].user_attrs["params"])["BLOCK_K"] == 64

    off = tmp_path / "off"
    proc = cli_main(capsys, "run", *common, "--no-kb", "--out", str(off), "--name", "off")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "knowledge-start" not in [t.user_attrs["operator"]
                                     for t in _trials(off, "off/level1/1_Square_matrix_multiplication_")]


@pytest.mark.slow
def test_a_campaign_on_a_large_k_gemm_evaluates_the_split_k_start(tmp_path, capsys):
    """L1/6's form (one output tile, a long K) on the interpreter: the matmul template's split-K start is made and
    passes the chain. The campaign judges a start as the route judges a child (the source's operand sizes): judged at
    the fp32 task's 4-byte operands, the template's own 128x128x64 tile broke the shared-memory rule and the start was
    never made."""
    out = tmp_path / "sk"
    proc = cli_main(capsys, "run", "--task", "L1/6", "--set", "M=64", "--set", "N=64", "--set", "K=1024",
                    "--backend", "interpreter", "--budget-evals", "2", "--operators", "params", "--workers", "1",
                    "--json", "--out", str(out), "--name", "sk")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = _trials(out, "sk/level1/6_Matmul_with_large_K_dimension_")
    assert [t.user_attrs["operator"] for t in trials] == ["seed", "knowledge-start"]
    start = json.loads(trials[1].user_attrs["params"])
    # 1 tile for 132 SMs, 16 K tiles: the most splits that keep 4 K tiles each (K=1024: each of the interpreter's
    # kernel calls takes a quarter of what the task's K=4096 took, 75 s a campaign on two cores)
    assert start["SPLIT_K"] == 4 and trials[1].user_attrs["status"] == "ok", trials[1].user_attrs


def test_a_convolution_kernel_starts_on_rounded_tf32_where_cudnn_computes_the_reference():
    """The ``triton-conv`` build of a captured convolution task (two convolutions here) gets one start with every
    convolution's dot on operands rounded to TF32 (cuDNN's TF32, the reference's own arithmetic by default on a CUDA
    GPU), legal under the hard rules; none on a CPU (the reference's convolution is exact fp32 there), none where
    every kernel already starts there, none for a GEMM template's PRECISION (an fp32 GEMM reference is exact)."""
    from evoforge.knowledge.starts import TF32_ROUND, tf32_round_starts
    from evoforge.mutators.conv_kernel import PRECISIONS, with_triton_conv
    from evoforge.mutators.inductor_seed import InductorCapture, seed_from_capture

    from tests.conftest import FIXTURES

    capture = (FIXTURES / "inductor" / "level2_87_Conv2d_Subtract_Subtract_Mish.main.cpu.json").read_text()
    seed = seed_from_capture(InductorCapture.from_json(capture), allow_ops=("convolution",))
    call = next(line for line in seed.splitlines() if "torch.convolution(" in line).strip()
    twice = seed.replace(call, call + "\n        " + call, 1)  # the same convolution twice: two kernels
    assert TF32_ROUND in PRECISIONS
    for source, convs in ((seed, 1), (twice, 2)):
        built = with_triton_conv(source)
        assert built is not None
        space, params = declared_space(built)
        starts = tf32_round_starts(space, params, ARCH, cudnn=True, source=built)
        assert [s.change for s in starts] == [{f"conv{i}_PRECISION": TF32_ROUND for i in range(convs)}]
        assert knowledge.is_legal(starts[0].params, ARCH, source=built)[0]
        assert tf32_round_starts(space, params, ARCH, cudnn=False, source=built) == []
        assert tf32_round_starts(space, starts[0].params, ARCH, cudnn=True, source=built) == []
    space, params = _split_space()
    assert tf32_round_starts(space, params, ARCH, cudnn=True) == []
