"""`evoforge report` on a real record: what a reader of the page must find there."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from evoforge.core import UsageError
from evoforge.report import lineage, open_run, write_report
from tests.conftest import cli_main
from tests.experiments.conftest import OTHER, TASK, make_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _leaderboard_rows(page: str) -> dict[str, list[str]]:
    section = page.split("<h2>Leaderboard</h2>", 1)[1].split("</table>", 1)[0]
    rows = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", section, flags=re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, flags=re.S)]
        rows[cells[0]] = cells
    return rows


def test_report_page_has_leaderboard_curves_statuses_lineage_and_source(run_dir: Path) -> None:
    page_path = write_report(run_dir)
    assert page_path == run_dir / "report" / "index.html"
    page = page_path.read_text()

    rows = _leaderboard_rows(page)
    header = rows["task"]
    relu = dict(zip(header, rows[TASK], strict=True))
    assert relu["best speedup"] == "2.5x"
    assert relu["runtime ms"] == "0.8" and relu["ref ms"] == "2"
    assert relu["% of floor"] == "31%"
    assert relu["evaluations"] == "7" and relu["correct"] == "4"
    assert relu["evals to first correct"] == "1"
    assert relu["best by"] == "llm-optimize"
    assert relu["tokens"] == "1500"
    sigmoid = dict(zip(header, rows[OTHER], strict=True))
    assert sigmoid["best speedup"] == "–" and sigmoid["evals to first correct"] == "–"

    # Figures beside the page, referenced relatively, as PNG and SVG.
    for stem in ("convergence", "statuses"):
        png = run_dir / "report" / f"{stem}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
        assert (run_dir / "report" / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
        assert f'src="{stem}.png"' in page and f'href="{stem}.svg"' in page
    assert "http://" not in page and "https://" not in page and "<link" not in page  # opens with no server

    # Status breakdown: every evaluation counted under its status.
    outcomes = page.split("<h2>Outcomes</h2>", 1)[1].split("</table>", 1)[0]
    assert "compile_error" in outcomes and "timeout" in outcomes and "runtime_error" in outcomes

    # The interpreter's times are labelled for what they are.
    assert "not representative of a GPU" in page

    # Lineage of the best kernel, seed first, one step per operator with its speedup.
    chain = page.split("Lineage (seed first)", 1)[1].split("</table>", 1)[0]
    order = [chain.index(op) for op in ("<b>seed</b>", "<b>params</b>", "<b>rule:vectorize</b>", "<b>llm-optimize</b>")]
    assert order == sorted(order)
    assert "1.6x" in chain and "2x" in chain and "2.5x" in chain

    # The best kernel's source, HTML-escaped, with its tuned parameters baked in.
    assert "# rule, then llm &lt;b&gt;&amp;amp;&lt;/b&gt;" in page
    assert "<b>&amp;</b>" not in page
    assert "PARAMS = {&#x27;BLOCK&#x27;: 2048" in page
    assert "No correct kernel yet" in page  # the sigmoid task


def test_lineage_walks_parents_back_to_the_seed(tmp_path: Path) -> None:
    ids = make_run(tmp_path / "run")
    run = open_run(tmp_path / "run")
    steps = lineage(run, TASK, ids["best"])
    assert [s["candidate_id"] for s in steps] == [ids["seed"], ids["tuned"], ids["ruled"], ids["best"]]
    assert [s["operator"] for s in steps] == ["seed", "params", "rule:vectorize", "llm-optimize"]
    assert [s["speedup"] for s in steps] == [1.0, 1.6, 2.0, 2.5]
    assert steps[2]["stage"] == "memory_access"


def test_report_while_running_and_without_a_summary(run_dir: Path) -> None:
    (run_dir / "summary.json").unlink()
    page = write_report(run_dir).read_text()
    assert "running or interrupted" in page and "2.5x" in page


def test_report_lists_every_task_with_why_it_did_not_run_its_budget(run_dir: Path) -> None:
    """A task with no way in has no study: the page left it out entirely. Its row and its reason are there now,
    as is the reason a task stopped early (both from the campaign's summary.json)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    why = "task level1/3_Batched_matrix_multiplication: no seed kernel (<cuBLAS>); seed_kernel in its [[tasks]] entry"
    summary["not_started"] = {"level1/3_Batched_matrix_multiplication": why}
    summary["tasks"][OTHER]["stopped_early"] = "no new candidate to propose after 2 of 8"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    page = write_report(run_dir).read_text()
    rows = _leaderboard_rows(page)
    header = rows["task"]
    missing = dict(zip(header, rows["level1/3_Batched_matrix_multiplication"], strict=True))
    assert missing["evaluations"] == "0" and missing["best speedup"] == "–" and missing["best by"] == "not started"
    assert dict(zip(header, rows[TASK], strict=True))["evaluations"] == "7"  # the others' rows as they were
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert f"level1/3_Batched_matrix_multiplication did not start: {why}" in text
    assert f"{OTHER} stopped early: no new candidate to propose after 2 of 8" in text


def test_report_of_a_campaign_that_has_just_started(tmp_path: Path) -> None:
    """Studies exist (set-up creates them) but no trial is recorded yet."""
    from evoforge.search.store import OptunaStore

    from evoforge.config import CampaignConfig, TaskConfig

    CampaignConfig(name="fresh", out=str(tmp_path), tasks=[TaskConfig(spec="L1/19")]).write(tmp_path / "config.json")
    OptunaStore(run_dir=tmp_path, campaign="fresh").study(TASK)
    page = write_report(tmp_path).read_text()
    assert "No evaluation recorded yet" in page and "No correct kernel yet" in page


def test_bad_run_dir_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such directory"):
        write_report(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a run directory"):
        write_report(tmp_path / "empty")


def test_report_cli(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = cli_main(capsys, "report", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert str(run_dir / "report" / "index.html") in done.stdout
    bad = cli_main(capsys, "report", str(tmp_path / "nowhere"))
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "nowhere" in bad.stderr


def test_wall_time_of_a_run_continued_without_resume_keeps_one_clock() -> None:
    import pandas as pd

    from evoforge.report import campaign_time

    assert campaign_time(pd.Series([1.0, 2.0, 5.0, 0.5, 3.0])).tolist() == [1.0, 2.0, 5.0, 5.5, 8.0]
