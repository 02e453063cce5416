"""The smoke ablation end to end: real campaigns on the Triton interpreter, one Ray session, then resumed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, cli_main

SMOKE = REPO / "experiments" / "ablations" / "smoke.toml"


def _campaign_can_run() -> bool:
    try:
        from evoforge.search.strategies import get_strategy  # noqa: F401  (a campaign needs one)
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _campaign_can_run(),
                    reason="the search strategies (evoforge.search.strategies.get_strategy) are not in this "
                           "checkout yet: a campaign cannot run")
def test_smoke_ablation_runs_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "smoke"
    # In this process (its Ray the ablation's one session): the command's own process adds a Python, a torch and a
    # Ray start to the suite and nothing the assertions read.
    done = cli_main(capsys, "ablate", str(SMOKE), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]

    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 4  # 2 variants x 1 task x 2 seeds
    assert sorted(set(summary["variant"])) == ["default", "random"]
    assert summary["correct"].all()  # the seed kernel is correct, so every run has a correct kernel
    assert (summary["best_speedup"] > 0).all()
    assert (summary["evaluations"] >= 1).all() and (summary["evaluations"] <= 8).all()
    assert (summary["evals_to_first_correct"] == 1).all()  # the seed is evaluated first
    assert not summary["timing_representative"].astype(bool).any()  # interpreter times, labelled as such

    agg = pd.read_csv(out / "aggregate.csv").set_index("variant")
    assert list(agg.index) == ["default", "random"]
    assert (agg["success_rate"] == 1.0).all() and (agg["fast_0"] == 1.0).all()
    assert "ablation: 2 seeds x 1 tasks" in done.stdout

    page = (out / "report" / "index.html").read_text()
    assert "Comparison" in page and "not representative of a GPU" in page
    for run in ("default-s0", "default-s1", "random-s0", "random-s1"):
        assert (out / "runs" / run / "summary.json").is_file()
        assert (out / "runs" / run / "report" / "convergence.png").is_file()

    # Again: every (variant, seed) is done, so nothing runs and nothing changes.
    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/summary.json")}
    again = cli_main(capsys, "ablate", str(SMOKE), "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr[-2000:]
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert pd.read_csv(out / "summary.csv").equals(summary)
