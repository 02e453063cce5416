"""CuTe in a campaign: the language travels from the task entry or the seed to the precheck, the record and the
export; each distinct build is compiled once, ahead of the GPU; a compile error is trimmed to its fault.

No Ray and no GPU: the campaign's set-up is run on its own (a CuTe campaign evaluates on ``cuda`` only), the
builds are real nvcc runs of a tiny CUDA source (a few seconds each; the CuTe headers would make each 20 s+).
"""

from __future__ import annotations

import json
import os
import time

import pytest
from evoforge.judge.precheck import precheck

from evoforge.config import CampaignConfig, TaskConfig
from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError, source_language
from tests.conftest import REPO, needs_nvcc

TEMPLATES = REPO / "knowledge" / "templates"
GEMM = TEMPLATES / "cute_gemm.py"


def _campaign(tmp_path, *tasks: TaskConfig):
    from evoforge.backends.registry import available_backend

    from evoforge.campaign import Campaign

    campaign = Campaign(CampaignConfig(name="cute", out=str(tmp_path / "run"), tasks=list(tasks), backend="interpreter",
                                       arch="nvidia-sm90"), progress=False)
    campaign.backend = available_backend("interpreter")
    return campaign


def test_a_cute_seed_file_is_a_cute_candidate_that_passes_the_precheck(tmp_path):
    (task, seed), = _campaign(tmp_path, TaskConfig(spec="L1/1", seed_kernel=str(GEMM)))._load_tasks()
    assert seed.language == "cute" and seed.operator == "seed"  # read from the seed: no language key needed
    assert seed.space == {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16, 32]}
    stamped, failure = precheck(seed, backend="cuda", arch="nvidia-sm90")
    assert failure is None, failure.message  # before: "the module defines no @triton.jit kernel"
    assert stamped.meta["static_check"]["language"] == "cute"


def test_a_task_that_asks_for_cute_is_seeded_by_the_cute_template(tmp_path):
    (_, seed), = _campaign(tmp_path, TaskConfig(spec="L1/1", language="cute"))._load_tasks()
    assert seed.language == "cute" and seed.meta["seed_file"].endswith("cute_gemm_fp32_3xtf32.py")
    (_, triton_seed), = _campaign(tmp_path, TaskConfig(spec="L1/1"))._load_tasks()
    assert triton_seed.language == "triton"  # the same task without the key keeps its Triton template


def test_a_triton_seed_for_a_cute_task_is_refused_in_one_line(tmp_path):
    triton = TEMPLATES / "matmul.py"
    with pytest.raises(UsageError, match="a triton kernel, but task .* asks for language cute"):
        _campaign(tmp_path, TaskConfig(spec="L1/1", language="cute", seed_kernel=str(triton)))._load_tasks()


def test_source_language_reads_the_module_without_running_it():
    assert source_language(GEMM.read_text()) == "cute"
    without_marker = GEMM.read_text().replace('LANGUAGE = "cute"\n', "")
    assert source_language(without_marker) == "cute"  # CUDA_SRC loaded through evoforge.backends.cute
    assert source_language((TEMPLATES / "matmul.py").read_text()) == "triton"
    assert Candidate.from_source(without_marker).language == "cute"
    assert Candidate.from_source(without_marker, language="triton").language == "triton"  # an explicit one wins


def test_a_cute_campaign_on_a_backend_without_cuda_is_one_line(tmp_path):
    from evoforge.campaign import Campaign

    config = CampaignConfig(name="cute", out=str(tmp_path / "run"), backend="interpreter", budget_evals=2,
                            tasks=[TaskConfig(spec="L1/1", language="cute")])
    with pytest.raises(UsageError, match="a CuTe kernel runs on --backend cuda only") as refused:
        Campaign(config, progress=False).prepare()
    assert "\n" not in str(refused.value) and "--compile-only" in str(refused.value)
    assert not (tmp_path / "run").exists()  # nothing written: a corrected retry is no second campaign


def test_the_record_and_the_export_carry_the_language_and_the_compile_time(tmp_path):
    from evoforge.search.store import OptunaStore

    from evoforge.export import export_best
    from evoforge.task import Task

    seed = Candidate.from_source(GEMM.read_text(), task="level1/1_Square_matrix_multiplication_")
    result = EvalResult(status=EvalStatus.OK, runtime_ms=1.0, ref_ms=2.0, speedup=2.0, compile_s=21.5,
                        backend="cuda", arch="nvidia-sm90")
    store = OptunaStore(run_dir=tmp_path, campaign="cute")
    store.record(seed.task, seed, result, extra_attrs={"build": {"compile_s": 21.5, "how": "nvcc"}})
    (trial,) = store.load(seed.task)
    assert trial.user_attrs["language"] == "cute" and trial.user_attrs["compile_s"] == 21.5
    assert trial.candidate.language == "cute"  # resume rebuilds it as CuTe
    info = export_best(tmp_path, Task.load("L1/1"), (seed, result), seed, result)
    assert info["language"] == "cute"
    assert "# language: CuTe" in open(info["file"]).read()


# ---------------------------------------------------------------- compile ahead (real nvcc, tiny sources)

TINY = '''import torch.nn as nn
from evoforge.backends.cute import load

CUDA_SRC = r"""
__global__ void fill(float* y) { y[threadIdx.x] = VALUE; }
extern "C" int launch(float* y) { fill<<<1, 32>>>(y); return 0; }
"""
SPACE = {"VALUE": [1, 2]}
PARAMS = {"VALUE": 1}


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


@needs_nvcc
def test_each_distinct_build_compiles_once_and_a_broken_one_reports_its_line(tmp_path, monkeypatch):
    from evoforge.backends.cute_builds import BuildAhead

    monkeypatch.setenv("EVOFORGE_CUTE_CACHE", str(tmp_path / "cache"))
    one = Candidate.from_source(TINY, task="t")
    same = one.with_params({"VALUE": 1}, operator="params")  # another trial, the same params
    two = one.with_params({"VALUE": 2}, operator="params")
    broken = Candidate.from_source(TINY.replace("threadIdx.x] = VALUE;", "threadIdx.x] = VALUE + undefined_name;"))
    ahead = BuildAhead(arch="nvidia-sm90", workers=2)
    try:
        a, b, c, d = ahead.build_all([one, same, two, broken])  # one generation, built in parallel
        assert ahead.nvcc_runs == 3  # `same` shared `one`'s build
        assert (a.how, b.how, c.how) == ("nvcc", "shared", "nvcc")
        assert a.build.path == b.build.path != c.build.path
        assert a.compile_s > 0 and b.compile_s == 0.0  # the nvcc time is counted once, on the build that ran
        assert d.failure is not None and d.failure.status is EvalStatus.COMPILE_ERROR
        assert 'CUDA_SRC.cu(2): error: identifier "undefined_name" is undefined' in d.failure.message
        assert "line N+3 of the candidate module" in d.failure.message  # where it is in the module
        assert d.failure.compile_s > 0
        again = ahead.submit(one.with_params({}, operator="rule")).result()
        assert again.how == "shared" and ahead.nvcc_runs == 3
    finally:
        ahead.close()
    later = BuildAhead(arch="nvidia-sm90", workers=1)  # a resumed campaign: the disk cache serves it
    try:
        assert later.submit(two).result().how == "cached" and later.nvcc_runs == 0
    finally:
        later.close()
    assert len(list((tmp_path / "cache").glob("*.so"))) == 2
    stopping = BuildAhead(arch="nvidia-sm90", workers=1)  # a campaign that ends while nvcc runs waits for nothing
    running = stopping.submit(one.with_params({"VALUE": 7}))
    from evoforge.backends import cute

    for _ in range(200):
        if cute._RUNNING:
            break
        time.sleep(0.05)
    stopping.close()
    outcome = running.result(timeout=30)
    assert outcome.failure is not None and outcome.failure.status is EvalStatus.COMPILE_ERROR
    assert os.environ["EVOFORGE_CUTE_CACHE"] == str(tmp_path / "cache")
    assert json.loads(next((tmp_path / "cache").glob("*.json")).read_text())["arch"] == "sm_90a"
