"""Every shipped campaign and ablation config loads, and names task and seed files that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoforge.ablation import load_ablation
from evoforge.config import load_config
from evoforge.task import Task, default_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]
CAMPAIGNS = sorted((REPO / "experiments" / "campaigns").glob("*.toml"))
ABLATIONS = sorted((REPO / "experiments" / "ablations").glob("*.toml"))
HAVE_KERNELBENCH = (default_kernelbench_dir() / "level1").is_dir()


def test_the_suites_are_there() -> None:
    names = {p.stem for p in CAMPAIGNS}
    assert {"kernelbench_l1", "kernelbench_l2", "kernelbench_l1_seeded", "overnight"} <= names
    assert {"smoke", "h200_kb"} <= {p.stem for p in ABLATIONS}


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_campaign_config_loads(path: Path) -> None:
    config = load_config(str(path))
    assert config.tasks
    for task in config.tasks:
        if task.seed_kernel:
            assert Path(task.seed_kernel).is_file(), task.seed_kernel
    if HAVE_KERNELBENCH:
        names = [Task.load(t.spec, overrides=t.set, shapes=t.shapes).name for t in config.tasks]
        assert len(set(names)) == len(names)


def test_suites_cover_kernelbench_levels() -> None:
    assert len(load_config(str(REPO / "experiments/campaigns/kernelbench_l1.toml")).tasks) == 100
    assert len(load_config(str(REPO / "experiments/campaigns/kernelbench_l2.toml")).tasks) == 100
    overnight = load_config(str(REPO / "experiments/campaigns/overnight.toml"))
    assert overnight.budget_minutes >= 60 and overnight.llm.budget_tokens > 0
    text = (REPO / "experiments/campaigns/overnight.toml").read_text()
    assert "postgresql+psycopg2://user@host/db" in text and "--resume" in text and "ray_address" in text


@pytest.mark.parametrize("path", ABLATIONS, ids=lambda p: p.stem)
def test_ablation_loads(path: Path, tmp_path: Path) -> None:
    spec = load_ablation(path)
    assert len(spec.variants) >= 2 and spec.seeds
    for variant in spec.variants:
        config = spec.config_for(variant, spec.seeds[0], tmp_path)
        for task in config.tasks:
            assert Path(task.seed_kernel).is_file(), task.seed_kernel
            if HAVE_KERNELBENCH:
                Task.load(task.spec, overrides=task.set, shapes=task.shapes)


def test_h200_ablation_is_kernelbench_level1_on_cuda() -> None:
    spec = load_ablation(REPO / "experiments/ablations/h200_kb.toml")
    config = spec.config_for(spec.variants[0], 0, Path("."))
    assert config.backend == "cuda" and len(config.tasks) >= 5
    assert all(t.spec.startswith("L1/") and not t.set for t in config.tasks)  # default shapes


def test_llm_loops_ablation_puts_the_three_loops_side_by_side() -> None:
    """stages, cutegen and default in one table, each with the knowledge base off, the loops that show figures
    with the feedback delay off; the CPU file on the interpreter, the GPU file on cuda at default shapes, the
    same variants in both."""
    cpu = load_ablation(REPO / "experiments/ablations/llm_loops.toml")
    gpu = load_ablation(REPO / "experiments/ablations/llm_loops_h200.toml")
    assert [v.name for v in cpu.variants] == [v.name for v in gpu.variants]

    def setting(spec, name: str) -> tuple[str, bool, bool]:
        config = spec.config_for(next(v for v in spec.variants if v.name == name), 0, Path("."))
        return config.strategy, config.knowledge, config.llm.delay_feedback

    for loop in ("default", "stages", "cutegen"):
        assert setting(cpu, loop) == (loop, True, True)
        assert setting(cpu, f"{loop}-no-kb") == (loop, False, True)
    for loop in ("default", "cutegen"):
        assert setting(cpu, f"{loop}-no-delay") == (loop, True, False)
    first = cpu.config_for(cpu.variants[0], 0, Path("."))
    assert first.backend == "interpreter" and first.llm.enabled and first.llm.base_url.startswith("http://127.")
    on_gpu = gpu.config_for(gpu.variants[0], 0, Path("."))
    assert on_gpu.backend == "cuda" and all(not t.set for t in on_gpu.tasks)
