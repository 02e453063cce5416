"""What evoforge prints holds the user's words as they are: rich reads `[...]` as markup unless told not to,
and a reason quoting `[[tasks]]` came out as "in its [] entry"."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from rich.console import Console

from evoforge.core import EvalResult, EvalStatus

REASON = ("task level1/3_Batched_matrix_multiplication: no seed kernel: no shipped template serves this task and "
          "torch.compile's code cannot be one (Inductor left [yellow]bmm[/yellow] to a vendor library); give "
          "--seed-kernel FILE (or seed_kernel in its [[tasks]] entry), or add llm-generate to --operators")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _summary() -> dict:
    task = {"evaluations": 3, "statuses": {"ok": 2, "incorrect": 1}, "best_speedup": 1.5, "best_runtime_ms": 2.0,
            "ref_ms": 3.0, "best_pct_of_floor": 10.0, "best_operator": "rule:[vectorize]",
            "timing_representative": False, "stopped_early": "no new candidate to propose after 3 of 8 [bold]"}
    return {"campaign": "demo[bold]", "run_dir": "runs/[red]x", "backend": "interpreter", "arch": "cpu",
            "tasks": {"level1/20_[dim]LeakyReLU": task},
            "not_started": {"level1/3_Batched_matrix_multiplication": REASON}}


def test_the_leaderboard_prints_names_and_reasons_literally(capsys: pytest.CaptureFixture[str]) -> None:
    from evoforge.campaign_cli import print_leaderboard

    print_leaderboard(_summary())
    out = capsys.readouterr().out
    assert f"level1/3_Batched_matrix_multiplication not started: {REASON}" in out.splitlines()
    assert "level1/20_[dim]LeakyReLU stopped early: no new candidate to propose after 3 of 8 [bold]" in out
    for text in ("campaign demo[bold] on interpreter (cpu)", "level1/20_[dim]LeakyRe", "rule:[vectorize]",
                 "Best kernels: runs/[red]x/best/"):
        assert text in out, text


def test_the_progress_shows_task_names_literally(capsys: pytest.CaptureFixture[str]) -> None:
    """The campaign's progress, as a live bar on a terminal and as a line every few seconds in a log file."""
    from evoforge.progress import CampaignProgress

    state = SimpleNamespace(evaluations=2, statuses={"ok": 2}, best=lambda: None)
    campaign = SimpleNamespace(config=SimpleNamespace(budget_evals=4), tasks={"level1/[bold]relu": state})
    terminal = io.StringIO()
    with CampaignProgress(campaign, console=Console(file=terminal, force_terminal=True, width=200)) as progress:
        progress.update()
    assert "[bold]relu: - | failures 0" in ANSI.sub("", terminal.getvalue())
    with CampaignProgress(campaign, console=Console(file=io.StringIO())) as progress:  # a log file: on stderr
        progress.update()
    assert "[2/4] [bold]relu: - | failures 0" in capsys.readouterr().err


def test_an_evaluation_prints_its_task_name_literally(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evoforge.cli import _print_result
    from evoforge.task import Task, resolve_task_path

    spec = tmp_path / "relu[red]v2.py"  # a user's own task file
    shutil.copy(resolve_task_path("L1/19"), spec)
    result = EvalResult.failure(EvalStatus.INCORRECT, "max abs err 3 at [0, 5]", backend="interpreter", arch="cpu")
    _print_result(Task.load(str(spec)), result)
    out = capsys.readouterr().out
    assert "relu[red]v2 on interpreter (cpu): incorrect" in out and "max abs err 3 at [0, 5]" in out


def test_an_ablation_table_prints_variant_names_literally() -> None:
    from evoforge.ablation import print_aggregate

    row = {"variant": "kb[off]", "seeds": 2, "tasks": 1, "success_rate": 1.0, "success_rate_lo": 1.0,
           "success_rate_hi": 1.0, "geomean_speedup": 1.2, "geomean_speedup_lo": 1.1, "geomean_speedup_hi": 1.3}
    out = io.StringIO()
    print_aggregate(pd.DataFrame([row]), 0.95, console=Console(file=out, width=120))
    assert "kb[off]" in out.getvalue()
