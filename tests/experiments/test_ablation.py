"""Ablation files, statistics with known answers, and the (variant, seed) runner's resumption."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from evoforge.ablation import Ablation, load_ablation
from evoforge.ablation_stats import aggregate, read_summary, t_quantile
from evoforge.config import CampaignConfig
from evoforge.core import UsageError
from evoforge.report import write_report
from tests.conftest import cli_main
from tests.experiments.conftest import make_run

REPO = Path(__file__).resolve().parents[2]

# variant A: seed 0 -> t1 2.0x, t2 0.5x; seed 1 -> t1 4.0x, t2 fails.
# variant B: seed 0 -> both fail;        seed 1 -> t1 exactly 1.0x, t2 3.0x.
# variant C: one task, three seeds at 1x, 2x, 4x.
SUMMARY_CSV = """variant,task,seed,correct,best_speedup,evaluations,evals_to_first_correct,tokens,wall_s,best_runtime_ms,ref_ms,timing_representative
A,t1,0,True,2.0,10,1,0,30,1.0,2.0,True
A,t2,0,True,0.5,10,3,0,30,4.0,2.0,True
A,t1,1,True,4.0,10,2,0,40,0.5,2.0,True
A,t2,1,False,,10,,0,40,,,
B,t1,0,False,,10,,0,50,,,
B,t2,0,False,,10,,0,50,,,
B,t1,1,True,1.0,10,5,100,60,2.0,2.0,True
B,t2,1,True,3.0,10,1,100,60,1.0,3.0,True
C,t1,0,True,1.0,10,1,0,10,2.0,2.0,True
C,t1,1,True,2.0,10,1,0,10,1.0,2.0,True
C,t1,2,True,4.0,10,1,0,10,0.5,2.0,True
"""


@pytest.fixture
def agg(tmp_path: Path) -> pd.DataFrame:
    (tmp_path / "summary.csv").write_text(SUMMARY_CSV)
    return aggregate(read_summary(tmp_path / "summary.csv")).set_index("variant")


def test_t_quantiles_match_the_tables() -> None:
    for df, t95 in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)):
        assert t_quantile(0.95, df) == pytest.approx(t95, abs=1e-4)
    assert t_quantile(0.99, 5) == pytest.approx(4.0321, abs=1e-4)


def test_fast_p_counts_failures_as_zero_and_is_strict(agg: pd.DataFrame) -> None:
    a, b = agg.loc["A"], agg.loc["B"]
    # A: fast_0 is the correct fraction: seed 0 -> 1, seed 1 -> 1/2.
    assert a["fast_0"] == pytest.approx(0.75)
    assert a["fast_1"] == pytest.approx(0.5)  # 2.0 and 4.0 beat 1; 0.5 does not
    assert a["fast_1.5"] == pytest.approx(0.5)
    assert a["fast_2"] == pytest.approx(0.25)  # speedup > p: 2.0 is not faster than 2x, 4.0 is
    assert a["success_rate"] == pytest.approx(0.75)
    # B: seed 0 nothing correct; seed 1: 1.0 is not > 1, 3.0 is.
    assert b["fast_0"] == pytest.approx(0.5)
    assert b["fast_1"] == pytest.approx(0.25)
    assert b["fast_2"] == pytest.approx(0.25)


def test_geomean_leaves_failures_out(agg: pd.DataFrame) -> None:
    a, b = agg.loc["A"], agg.loc["B"]
    # A: per-seed geomeans 1.0 (2.0 and 0.5) and 4.0 (the failure left out) -> geometric mean 2.0.
    assert a["geomean_speedup"] == pytest.approx(2.0)
    # B: seed 0 has no correct kernel, so no geomean; seed 1 -> sqrt(3); one seed gives no interval.
    assert b["geomean_speedup"] == pytest.approx(math.sqrt(3))
    assert b["geomean_seeds"] == 1 and math.isnan(b["geomean_speedup_lo"])


def test_confidence_intervals_across_seeds(agg: pd.DataFrame) -> None:
    c = agg.loc["C"]
    logs = [0.0, math.log(2), math.log(4)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = 4.302653 * sd / math.sqrt(3)  # t(0.975, 2 df)
    assert c["geomean_speedup"] == pytest.approx(2.0)
    assert c["geomean_speedup_lo"] == pytest.approx(math.exp(mean - half), rel=1e-5)
    assert c["geomean_speedup_hi"] == pytest.approx(math.exp(mean + half), rel=1e-5)
    # Every seed correct: success rate 1 with a zero-width interval.
    assert (c["success_rate"], c["success_rate_lo"], c["success_rate_hi"]) == (1.0, 1.0, 1.0)
    # fast_1 per seed 0, 1, 1: mean 2/3, interval 2/3 +- t * sd/sqrt(3), clipped to [0, 1].
    half_fast = 4.302653 * math.sqrt(1 / 3) / math.sqrt(3)
    assert c["fast_1"] == pytest.approx(2 / 3)
    assert c["fast_1_lo"] == pytest.approx(max(0.0, 2 / 3 - half_fast))
    assert c["fast_1_hi"] == 1.0
    a = agg.loc["A"]  # two seeds at 1 and 1/2: mean 3/4, half-width 12.706 * 0.25, clipped
    assert (a["success_rate_lo"], a["success_rate_hi"]) == (0.0, 1.0)
    assert c["seeds"] == 3 and a["seeds"] == 2 and a["tasks"] == 2


ABLATION = """
[campaign]
backend = "interpreter"
budget_evals = 4
operators = ["params"]

[[tasks]]
spec = "L1/19"
seed_kernel = "{seed}"

[llm]
model = "m"
delay_feedback = true

[ablation]
seeds = [0, 1]

[[variants]]
name = "default"

[[variants]]
name = "no-kb-eager"
knowledge = false
llm.delay_feedback = false
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ab.toml"
    path.write_text(text.replace("{seed}", str(REPO / "experiments" / "seeds" / "relu.py")))
    return path


def test_variant_configs(tmp_path: Path) -> None:
    spec = load_ablation(_write(tmp_path, ABLATION))
    assert spec.seeds == (0, 1) and [v.name for v in spec.variants] == ["default", "no-kb-eager"]
    config = spec.config_for(spec.variants[1], 1, tmp_path / "out")
    assert (config.name, config.seed, config.knowledge) == ("no-kb-eager-s1", 1, False)
    assert config.out == str((tmp_path / "out" / "runs" / "no-kb-eager-s1").resolve())
    assert config.llm.delay_feedback is False and config.llm.model == "m"  # merged into the base [llm]
    assert spec.config_for(spec.variants[0], 0, tmp_path).knowledge is True


@pytest.mark.parametrize("edit, key", [
    (("[ablation]", "[ablation]\nrepeats = 3"), "ablation.repeats"),
    (("[[variants]]\nname = \"default\"", "[[variants]]\nname = \"default\"\nstratgy = \"random\""), "stratgy"),
    (("llm.delay_feedback = false", "llm.delay_fedback = false"), "delay_fedback"),
    (("[campaign]", "[sweep]\nx = 1\n[campaign]"), "sweep"),
    (("knowledge = false", "seed = 3"), "seed"),
])
def test_unknown_or_reserved_keys_name_the_file_and_key(tmp_path: Path, edit: tuple[str, str], key: str) -> None:
    path = _write(tmp_path, ABLATION.replace(*edit))
    with pytest.raises(UsageError) as info:
        load_ablation(path)
    message = str(info.value)
    assert str(path) in message and key in message and "\n" not in message


def test_ablate_cli_rejects_a_bad_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, ABLATION.replace("[ablation]", "[ablation]\nrepeats = 3"))
    done = cli_main(capsys, "ablate", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "ablation.repeats" in done.stderr
    assert done.stderr.strip().count("\n") == 0


def test_runner_writes_summary_and_resumes(tmp_path: Path) -> None:
    """Each (variant, seed) is run once; a finished run is kept, an unfinished one is resumed."""
    spec = load_ablation(_write(tmp_path, ABLATION))
    out = tmp_path / "out"
    calls: list[tuple[str, bool]] = []

    def fake_campaign(config: CampaignConfig, resume: bool, tick) -> None:
        calls.append((config.name, resume))
        make_run(Path(config.out), name=config.name)  # a real record through the store
        tick(9, 9)

    summary = Ablation(spec, out_dir=out, progress=False, runner=fake_campaign).run()
    assert sorted(calls) == [("default-s0", False), ("default-s1", False), ("no-kb-eager-s0", False),
                             ("no-kb-eager-s1", False)]
    csv = read_summary(out / "summary.csv")
    assert len(csv) == len(summary) == 8  # 2 variants x 2 seeds x 2 tasks (the record's)
    row = csv[(csv["variant"] == "default") & (csv["seed"] == 1) & (csv["task"] == "level1/19_ReLU")].iloc[0]
    assert row["correct"] and row["best_speedup"] == 2.5 and row["evals_to_first_correct"] == 1
    assert row["tokens"] == 1500 and row["wall_s"] == 15.0 and row["timing_representative"] is False
    assert list(csv.columns[:12]) == ["variant", "task", "seed", "correct", "best_speedup", "evaluations",
                                      "evals_to_first_correct", "tokens", "wall_s", "best_runtime_ms", "ref_ms",
                                      "timing_representative"]

    # Killed in the middle of one run: its config is there, its summary is not.
    (out / "runs" / "no-kb-eager-s1" / "summary.json").unlink()
    calls.clear()
    Ablation(spec, out_dir=out, progress=False, runner=fake_campaign).run()
    assert calls == [("no-kb-eager-s1", True)]

    # The ablation report: comparison table and plots.
    page = write_report(out).read_text()
    assert "Comparison" in page and "no-kb-eager" in page and "fast_1.5" in page
    assert 'href="../runs/default-s0/report/index.html"' in page  # each run's own report, linked
    assert (out / "runs" / "default-s0" / "report" / "index.html").is_file()
    for png in ("speedup_per_variant.png", "fast_p.png"):
        assert (out / "report" / png).read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "ablation.json").read_text())["seeds"] == [0, 1]


# Interpreter speedups (1e-4x) and one wide interval: on linear axes everything sat on the zero line (issue 18).
INTERPRETER_CSV = """variant,task,seed,correct,best_speedup,evaluations,evals_to_first_correct,tokens,wall_s,best_runtime_ms,ref_ms,timing_representative
narrow,t1,0,True,0.00011,10,1,0,30,10.0,0.0011,True
narrow,t1,1,True,0.00012,10,1,0,30,10.0,0.0012,True
wide,t1,0,True,0.0001,10,1,0,30,10.0,0.001,True
wide,t1,1,True,0.9,10,1,0,30,1.0,0.9,True
"""


def test_ablation_plots_show_small_speedups_on_log_scales(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evoforge import report
    from evoforge.ablation_stats import fast_p_curves

    figures = {}
    monkeypatch.setattr(report, "_save", lambda fig, out_dir, stem: figures.setdefault(stem, fig) and f"{stem}.png")
    (tmp_path / "summary.csv").write_text(INTERPRETER_CSV)
    summary = read_summary(tmp_path / "summary.csv")
    report.plot_ablation_speedup(aggregate(summary), tmp_path, 0.95)
    curves = fast_p_curves(summary)
    report.plot_fast_p(curves, tmp_path)
    assert figures["speedup_per_variant"].axes[0].get_yscale() == "log"
    assert figures["fast_p"].axes[0].get_xscale() == "log"
    # The curve steps where the speedups are: thresholds between 1e-4 and 1e-3 are on the grid.
    narrow = curves[curves["variant"] == "narrow"]
    assert ((narrow["p"] > 1e-4) & (narrow["p"] < 1.1e-4)).any()
    assert narrow[narrow["p"] < 1e-4]["fast_p"].min() == 1.0 and narrow[narrow["p"] > 2e-4]["fast_p"].max() == 0.0
