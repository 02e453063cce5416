"""The replay backend answers what the H200 answered when the landscape was recorded."""

from __future__ import annotations

import json

import pytest
from evoforge.backends.base import Backend, EvaluationProcess
from evoforge.backends.registry import get_backend
from evoforge.backends.replay import Landscape

from evoforge.core import EvalStatus, UsageError
from tests.search.conftest import MATMUL


def _row(landscape: Landscape, status: str) -> dict:
    return next(r for r in landscape.rows if r["status"] == status)


def test_a_recorded_config_replays_its_time_and_the_reference(matmul: Landscape) -> None:
    row = _row(matmul, "ok")
    result = matmul.evaluate(matmul.params_of(row))
    assert result.status is EvalStatus.OK
    assert result.runtime_ms == row["ms"]
    assert result.ref_ms == pytest.approx(0.17740799486637115)  # cuBLAS, from the file
    assert result.speedup == pytest.approx(result.ref_ms / row["ms"])
    assert result.backend == "replay" and result.arch == "nvidia-sm90"


def test_a_config_that_did_not_fit_is_a_compile_error_named_after_its_exception(matmul: Landscape) -> None:
    result = matmul.evaluate(matmul.params_of(_row(matmul, "OutOfResources")))
    assert result.status is EvalStatus.COMPILE_ERROR
    assert result.message.startswith("OutOfResources: ")
    assert result.runtime_ms is None


def test_an_incorrect_row_is_incorrect(tmp_path) -> None:
    path = tmp_path / "l.json"
    path.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "space": {"B": [1, 2]}, "baseline_ms": {"torch": 1.0},
                                "rows": [{"B": 1, "ms": 0.5, "rel_err": 0.3, "status": "incorrect"},
                                         {"B": 2, "ms": 0.7, "status": "ok"}]}))
    landscape = Landscape.load(path)
    assert landscape.evaluate({"B": 1}).status is EvalStatus.INCORRECT
    assert landscape.best_ms == 0.7  # an incorrect config is never the best, however fast
    assert landscape.arch == "nvidia-sm90"


def test_a_config_not_in_the_file_is_invalid(matmul: Landscape) -> None:
    params = {**matmul.params_of(matmul.rows[0]), "BLOCK_M": 96}
    result = matmul.evaluate(params)
    assert result.status is EvalStatus.INVALID and "not in matmul_bf16_4096.json" in result.message


def test_the_seed_candidate_declares_the_files_space(matmul: Landscape) -> None:
    seed = matmul.seed_candidate()
    assert seed.space == matmul.space
    assert set(seed.params) == set(matmul.space)


def test_a_bad_path_is_one_line_naming_the_file(tmp_path) -> None:
    with pytest.raises(UsageError, match="nope.json: landscape file not found"):
        Landscape.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="bad.json: not a readable landscape"):
        Landscape.load(bad)


def test_the_backend_is_registered_and_keeps_the_protocol() -> None:
    backend = get_backend("replay", landscape=str(MATMUL))
    assert isinstance(backend, Backend)
    assert backend.available()[0] and backend.device == "cpu" and backend.arch == "nvidia-sm90"
    assert backend.properties["configs"] == 432 and backend.evaluation_process() == EvaluationProcess()
    backend.synchronize()
    with pytest.raises(NotImplementedError, match="times nothing"):
        backend.time_interleaved({"f": lambda: None})
    seed = backend.landscape.seed_candidate()
    assert backend.evaluate(seed).status in set(EvalStatus)
    assert not get_backend("replay").available()[0]


def test_a_config_the_recording_measured_as_its_twin_is_answered_from_the_twin(tmp_path) -> None:
    """The fp32 GEMM recording measures configs that build one kernel once (PRECISION is read only when SPLIT is
    none) and was cut short, so it holds some twins and not others. A search that asked for the missing twin was
    told nothing (the config 'was never measured'), though its answer is in the file; the file's ``when`` says
    which parameters a path leaves unread."""
    space = {"BLOCK": [64, 128], "SPLIT": ["bf16x3", "none"], "PRECISION": ["tf32", "ieee"]}
    rows = [{"BLOCK": 64, "SPLIT": "bf16x3", "PRECISION": "tf32", "ms": 1.0, "status": "ok"},
            {"BLOCK": 64, "SPLIT": "none", "PRECISION": "ieee", "ms": 4.0, "status": "ok"},
            {"BLOCK": 128, "SPLIT": "bf16x3", "PRECISION": "ieee", "ms": None, "status": "OutOfResources"}]
    path = tmp_path / "fp32.json"
    path.write_text(json.dumps({"kernel": "k", "dtype": "torch.float32", "gpu": "NVIDIA H200", "space": space,
                                "when": {"PRECISION": {"SPLIT": ["none"]}}, "rows": rows}))
    landscape = Landscape.load(path)
    twin = {"BLOCK": 64, "SPLIT": "bf16x3", "PRECISION": "ieee"}
    assert landscape.holds(twin) and landscape.evaluate(twin).runtime_ms == 1.0
    assert landscape.evaluate({"BLOCK": 128, "SPLIT": "bf16x3", "PRECISION": "tf32"}).status is EvalStatus.COMPILE_ERROR
    # where PRECISION is read, another PRECISION is another kernel: not answered
    assert not landscape.holds({"BLOCK": 64, "SPLIT": "none", "PRECISION": "tf32"})
    # without ``when`` nothing is a twin
    path.write_text(json.dumps({"kernel": "k", "dtype": "torch.float32", "gpu": "NVIDIA H200", "space": space,
                                "rows": rows}))
    assert not Landscape.load(path).holds(twin)


def test_a_landscape_read_again_through_another_link_is_not_parsed_again(tmp_path, monkeypatch) -> None:
    from pathlib import Path

    source = Path(__file__).parent / "landscapes" / "softmax_fp16_32768x1024.json"
    links = []
    for i in range(3):
        link = tmp_path / f"softmax-{i}.json"
        link.symlink_to(source)
        links.append(link)
    reads = 0
    real = Landscape._read.__func__

    def counted(cls, p):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return real(cls, p)

    monkeypatch.setattr(Landscape, "_read", classmethod(counted))
    first, *others = [Landscape.load(link) for link in links]
    assert reads <= 1  # (none where an earlier test of this process read the file)
    assert [o.path for o in others] == [str(links[1]), str(links[2])]
    assert all(o.rows is first.rows and o.kernel == first.kernel for o in others)  # the file names its kernel
    config = dict(zip(first.space, (v[0] for v in first.space.values()), strict=True))
    assert others[1]._row(config) is first._row(config)
