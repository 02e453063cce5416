"""Ways in (issue 15) through a real campaign: a plain kernel is tuned; one with nothing to tune says why it stops."""

from __future__ import annotations

import html
import json
import re

import optuna
import pytest

from tests.conftest import FIXTURES, PLAIN_LEAKY_TASK, PLAIN_RELU_TASK, cli_main


@pytest.mark.slow
def test_a_plain_kernel_is_tuned_and_an_untunable_one_says_why_it_stopped(tmp_path, capsys):
    config = tmp_path / "ways.toml"
    config.write_text(f"""
[campaign]
name = "ways"
budget_evals = 3
operators = ["params", "rule"]
workers = 1
{PLAIN_RELU_TASK}{PLAIN_LEAKY_TASK}""")
    out = tmp_path / "run"
    proc = cli_main(capsys, "run", str(config), "--backend", "interpreter", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])["tasks"]
    relu, leaky = summary["level1/19_ReLU"], summary["level1/20_LeakyReLU"]
    # The plain ReLU kernel got a SPACE from its launch constants and spent its whole budget on it.
    assert relu["evaluations"] == 3 and relu.get("stopped_early") is None
    trials = optuna.load_study(study_name="ways/level1/19_ReLU", storage=f"sqlite:///{out}/optuna.db").trials
    assert trials[0].user_attrs["operator"] == "lifted-seed"
    params = [json.loads(t.user_attrs["params"]) for t in trials]
    assert params[0]["BLOCK"] == 1024 and "num_warps" in params[0]  # the written values, now parameters
    assert any(p != params[0] for p in params[1:]), params  # and another configuration of them was evaluated
    # The LeakyReLU kernel has nothing to lift: it stops early, and says why and what would let it go on.
    assert leaky["evaluations"] < 3
    why = leaky["stopped_early"]
    assert "no new candidate to propose after" in why and "SPACE" in why and "--llm-model" in why


def _with_capture(tmp_path, capture_text: str):
    """A run directory whose seeds/ already holds the task's capture (the campaign captures only what is missing)."""
    out = tmp_path / "run"
    (out / "seeds").mkdir(parents=True)
    (out / "seeds" / "level1_20_LeakyReLU.inductor.json").write_text(capture_text)
    return out


def test_a_task_no_template_serves_starts_from_the_inductor_seed(tmp_path):
    from evoforge.backends.registry import available_backend

    from evoforge.campaign import Campaign
    from evoforge.config import CampaignConfig, TaskConfig

    out = _with_capture(tmp_path, (FIXTURES / "inductor" / "level1_20_LeakyReLU.cpu.json").read_text())
    config = CampaignConfig(name="ind", out=str(out), backend="interpreter", arch="nvidia-sm90",
                            tasks=[TaskConfig(spec="L1/20", set={"batch_size": 4, "dim": 1000})])
    campaign = Campaign(config, progress=False)
    campaign.backend = available_backend("interpreter")
    [(task, seed)] = campaign._load_tasks()
    assert seed.operator == "inductor-seed" and seed.meta["compute_rule"] == "strict"
    assert len(seed.space["XBLOCK"]) > 1 and "class ModelNew" in (out / "seeds" / "level1_20_LeakyReLU.py").read_text()


def test_a_task_with_no_way_in_stops_at_set_up_in_one_line(tmp_path, capsys):
    reason = "Inductor calls convolution from a vendor library for this task"
    out = _with_capture(tmp_path, json.dumps({"no_seed": reason}))
    proc = cli_main(capsys, "run", "--task", "L1/20", "--set", "batch_size=4", "--set", "dim=1000", "--backend",
                    "interpreter", "--out", str(out))
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip()
    assert "\n" not in line and reason in line and "--seed-kernel" in line and "Traceback" not in line


@pytest.mark.slow
def test_a_campaign_of_several_tasks_goes_on_without_one_that_cannot_start(tmp_path, capsys):
    """A benchmark campaign (experiments/campaigns/kernelbench_l1.toml: 100 tasks) stopped at set-up on its first
    batched GEMM, which Inductor leaves to cuBLAS: one task with no way in cost the other 99. Now that task is left out with
    one line, said at set-up and in the summary, and the others run."""
    out = _with_capture(tmp_path, (FIXTURES / "inductor" / "level1_20_LeakyReLU.cpu.json").read_text())
    reason = "Inductor made no Triton kernel for this task (it runs as library calls only: [yellow]bmm)"
    (out / "seeds" / "level1_3_Batched_matrix_multiplication.inductor.json").write_text(json.dumps({"no_seed": reason}))
    config = tmp_path / "two.toml"
    config.write_text(f'[campaign]\nname = "two"\nout = "{out}"\nbackend = "interpreter"\nbudget_evals = 2\n'
                      '[[tasks]]\nspec = "L1/3"\nset = {batch_size = 2, m = 8, k = 8, n = 8}\n'
                      '[[tasks]]\nspec = "L1/20"\nset = {batch_size = 4, dim = 1000}\n')
    proc = cli_main(capsys, "run", str(config), "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["tasks"]) == ["level1/20_LeakyReLU"] and summary["tasks"]["level1/20_LeakyReLU"]["evaluations"]
    assert reason in summary["not_started"]["level1/3_Batched_matrix_multiplication"]
    assert "level1/3_Batched_matrix_multiplication not started" in proc.stdout + proc.stderr
    # The summary's line holds the reason word for word (rich markup swallowed "[[tasks]]" and "[yellow]"), and
    # the report lists the task with it.
    why = summary["not_started"]["level1/3_Batched_matrix_multiplication"]
    assert "[yellow]bmm" in why and "in its [[tasks]] entry" in why
    assert f"level1/3_Batched_matrix_multiplication not started: {why}" in proc.stdout.splitlines()
    assert cli_main(capsys, "report", str(out)).returncode == 0
    page = html.unescape(re.sub(r"<[^>]+>", "", (out / "report" / "index.html").read_text()))
    assert f"level1/3_Batched_matrix_multiplication did not start: {why}" in page
    # Every task so: the campaign stops, in one line.
    none = tmp_path / "none" / "seeds"
    none.mkdir(parents=True)
    for stem in ("level1_20_LeakyReLU", "level1_3_Batched_matrix_multiplication"):
        (none / f"{stem}.inductor.json").write_text(json.dumps({"no_seed": reason}))
    proc = cli_main(capsys, "run", str(config), "--quiet", "--out", str(none.parent))
    assert proc.returncode == 2 and "no task of this campaign can start" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_inductor_variants_are_evaluated_beside_the_seed_and_recorded(tmp_path, capsys):
    """A task whose capture holds Inductor variants (the main shape's build with reductions unsplit, looped): each
    is evaluated right after the seed as ``inductor-variant``, the record naming its configuration; the seed's two
    paths ran where they belong (``kernels_by_shape``)."""
    out = tmp_path / "run"
    (out / "seeds").mkdir(parents=True)
    (out / "seeds" / "level1_96_HuberLoss.inductor.json").write_text(
        (FIXTURES / "inductor" / "level1_96_HuberLoss.main.cpu.json").read_text())
    proc = cli_main(capsys, "run", "--task", "L1/96", "--set", "batch_size=64", "--set", "input_shape=[4096]",
                    "--backend", "interpreter", "--budget-evals", "3", "--workers", "2", "--out", str(out), "--name",
                    "var", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = optuna.load_study(study_name="var/level1/96_HuberLoss", storage=f"sqlite:///{out}/optuna.db").trials
    by_operator = {t.user_attrs["operator"]: t for t in trials}
    assert set(by_operator) == {"inductor-seed", "inductor-variant"}, by_operator
    configs = sorted(t.user_attrs.get("inductor_config") for t in trials if t.user_attrs["operator"] == "inductor-variant")
    assert configs == ["looped-reductions", "unsplit-reductions"], configs
    assert all(t.user_attrs["status"] == "ok" for t in trials), [t.user_attrs["message"] for t in trials]
    paths = json.loads(by_operator["inductor-seed"].user_attrs["kernels_by_shape"])
    assert all(k.endswith("_main") for k in paths["main"]) and not any(
        k.endswith("_main") for label, names in paths.items() if label != "main" for k in names), paths


@pytest.mark.slow
def test_a_variants_gemm_gets_the_knowledge_bases_split_start_after_it(tmp_path, capsys):
    """With cuBLAS allowed the seed keeps torch.compile's addmm, so its GEMM is no template to split; the variant
    whose GEMM is Inductor's Triton template is, and the knowledge base's start for it (the template's operands
    split into bf16 parts) is evaluated right after the variant, its child."""
    out = tmp_path / "run"
    (out / "seeds").mkdir(parents=True)
    (out / "seeds" / "level2_9_Matmul_Subtract_Multiply_ReLU.inductor.json").write_text(
        (FIXTURES / "inductor" / "level2_9_Matmul_Subtract_Multiply_ReLU.gemm.cpu.json").read_text())
    proc = cli_main(capsys, "run", "--task", "L2/9", "--set", "batch_size=8", "--set", "in_features=32",
                    "--set", "out_features=16", "--allow-ops", "addmm,mm",
                    "--backend", "interpreter", "--budget-evals", "3", "--workers", "1", "--operators", "params",
                    "--out", str(out), "--name", "split", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = optuna.load_study(study_name="split/level2/9_Matmul_Subtract_Multiply_ReLU", storage=f"sqlite:///{out}/optuna.db").trials
    ops = [t.user_attrs["operator"] for t in trials]
    assert ops == ["inductor-seed", "inductor-variant", "knowledge-start"], ops
    variant, start = trials[1], trials[2]
    assert json.loads(start.user_attrs["params"])["PRECISION"] == "bf16x3-split"
    assert list(start.user_attrs["parents"]) == [variant.user_attrs["candidate_id"]], start.user_attrs
    assert all(t.user_attrs["status"] == "ok" for t in trials), [t.user_attrs["message"] for t in trials]


@pytest.mark.slow
def test_a_time_budget_shorter_than_the_set_up_still_evaluates(tmp_path, capsys):
    """The time budget is the search's: Ray's start (and a capture's torch.compile) come before it. A 1.2 s budget
    was spent before the first evaluator answered, and the campaign ended with nothing evaluated. (Where this
    process's Ray is already up, the evaluator's own start, an actor and its judge, still takes longer than 1.2 s.)"""
    out = tmp_path / "run"
    proc = cli_main(capsys, "run", "--task", "L1/19", "--seed-kernel", str(FIXTURES / "relu" / "plain_constants.py"),
                    "--set", "batch_size=4", "--set", "dim=1000", "--backend", "interpreter", "--budget-minutes",
                    "0.02", "--budget-evals", "4", "--workers", "1", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    task = json.loads(proc.stdout.strip().splitlines()[-1])["tasks"]["level1/19_ReLU"]
    assert task["evaluations"] >= 1 and task["best_speedup"] is not None, task
    # Where the evaluators are fast (a warm machine, this process's Ray up), all four fit in 1.2 s; where they do not,
    # the time budget is what stopped the task, and the summary says so.
    if task["evaluations"] < 4:
        assert "time budget" in (task["stopped_early"] or ""), task

