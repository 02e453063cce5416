"""A real run directory written through the store (Optuna SQLite record, candidates, artifacts)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from evoforge.search.store import OptunaStore

from evoforge.config import CampaignConfig, TaskConfig
from evoforge.core import Candidate, EvalResult, EvalStatus

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "experiments" / "benchmarks"


def load_script(name: str) -> Any:
    """``experiments/benchmarks/<name>.py`` loaded as a module of its own (``<name>_under_test``): the scripts are
    files, not a package."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
RELU = (REPO / "tests" / "fixtures" / "relu" / "correct.py").read_text()
TASK = "level1/19_ReLU"
OTHER = "level1/21_Sigmoid"


def _ok(speedup: float, *, interpreted: bool = True) -> EvalResult:
    ref = 2.0
    return EvalResult(status=EvalStatus.OK, runtime_ms=ref / speedup, ref_ms=ref, speedup=speedup,
                      pct_of_floor=12.5 * speedup, timing_representative=not interpreted,
                      backend="interpreter", arch="cpu", device_name="cpu (Triton interpreter)",
                      versions={"torch": "2.13.0", "triton": "3.6.0"}, criterion="float64", eval_s=0.5)


def make_run(run_dir: Path, *, name: str = "demo") -> dict[str, str]:
    """Write a small campaign record: a lineage seed -> params -> rule -> llm-optimize (the best, 2.5x),
    failures of several kinds, and a second task that never got a correct kernel. Returns candidate ids."""
    config = CampaignConfig(name=name, out=str(run_dir), backend="interpreter", arch="cpu", budget_evals=8,
                            operators=["params", "rule", "llm"],
                            tasks=[TaskConfig(spec="L1/19", set={"batch_size": 16, "dim": 1024}),
                                   TaskConfig(spec="L1/21")])
    run_dir.mkdir(parents=True, exist_ok=True)
    config.write(run_dir / "config.json")
    store = OptunaStore(run_dir=run_dir, campaign=name)
    seed = Candidate.from_source(RELU, task=TASK, operator="seed")
    tuned = seed.with_params({"BLOCK": 2048}, operator="params", parents=(seed.id,))
    ruled = replace(Candidate.from_source(RELU.replace("x = x.contiguous()", "x = x.contiguous()  # rule"),
                                          task=TASK, params={"BLOCK": 2048}),
                    operator="rule:vectorize", parents=(tuned.id,), stage="memory_access")
    broken = replace(ruled, source=ruled.source + "\nthis is not python <script>\n", operator="llm-stage",
                     parents=(ruled.id,), stage="fusion")
    best = replace(Candidate.from_source(ruled.source.replace("# rule", "# rule, then llm <b>&amp;</b>"),
                                         task=TASK, params={"BLOCK": 2048}),
                   operator="llm-optimize", parents=(ruled.id,), stage="autotuning",
                   meta={"model": "fake-model", "prompt_tokens": 1200, "completion_tokens": 300,
                         "prompt": [{"role": "user", "content": "make it faster"}], "reply": "```python\n...\n```"})
    slow = seed.with_params({"BLOCK": 256}, operator="params", parents=(seed.id,))
    history = [
        (TASK, seed, _ok(1.0)),
        (TASK, slow, EvalResult.failure(EvalStatus.INCORRECT, "max abs err 3.1 at [0, 5]", backend="interpreter")),
        (TASK, tuned, _ok(1.6)),
        (TASK, ruled, _ok(2.0)),
        (TASK, broken, EvalResult.failure(EvalStatus.COMPILE_ERROR, "SyntaxError: invalid syntax (line 30)")),
        (TASK, best, _ok(2.5)),
        (TASK, slow, EvalResult.failure(EvalStatus.TIMEOUT, "killed after 20 s")),
        (OTHER, replace(seed, task=OTHER), EvalResult.failure(EvalStatus.INCORRECT, "wrong function")),
        (OTHER, replace(slow, task=OTHER), EvalResult.failure(EvalStatus.RUNTIME_ERROR, "IndexError")),
    ]
    counts: dict[str, int] = {}
    for i, (task, candidate, result) in enumerate(history):
        n = counts.get(task, 0)
        counts[task] = n + 1
        store.record(task, candidate, result, extra_attrs={"worker": "w0", "wall_time_s": 1.5 * (i + 1),
                                                            "evaluation": n})
    summary = {"campaign": name, "run_dir": str(run_dir), "elapsed_s": 15.0, "backend": "interpreter",
               "arch": "cpu", "tasks": {TASK: {"evaluations": 7}, OTHER: {"evaluations": 2}}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return {"seed": seed.id, "tuned": tuned.id, "ruled": ruled.id, "best": best.id}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    make_run(path)
    return path
