"""``evoforge quickstart``: ``make demo``'s campaign from any folder, from the config shipped in the package."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO


def test_the_packaged_quickstart_is_the_experiments_file_and_make_demo_runs_it():
    from evoforge.campaign_cli import quickstart_config

    packaged = quickstart_config()
    assert packaged.read_bytes() == (REPO / "experiments" / "quickstart.toml").read_bytes()
    assert tomllib.loads(packaged.read_text())["campaign"]["name"] == "quickstart"
    demo = re.search(r"(?ms)^demo:.*?(?=^\S)", (REPO / "Makefile").read_text()).group(0)
    assert "evoforge quickstart" in demo and "experiments/quickstart.toml" not in demo


def test_a_second_quickstart_continues_the_first(tmp_path, monkeypatch):
    """As ``make demo`` did: the first call starts the campaign, a later one resumes it, flags passed on."""
    from evoforge import campaign_cli
    from evoforge.cli import main

    seen = []
    monkeypatch.setattr(campaign_cli, "cmd_run", lambda args: seen.append(args) or 0)
    out = tmp_path / "qs"
    assert main(["quickstart", "--out", str(out), "--budget-evals", "2", "--quiet"]) == 0
    first = seen[-1]
    assert first.config == str(campaign_cli.quickstart_config()) and first.out == str(out) and not first.resume
    assert first.budget_evals == 2 and first.quiet
    out.mkdir()
    (out / "config.json").write_text("{}")
    assert main(["quickstart", "--out", str(out), "--backend", "interpreter"]) == 0
    again = seen[-1]
    assert again.resume == str(out) and again.config is None and again.backend == "interpreter"


# The quickstart's real run, from an empty folder with the installed wheel: tests/evoforge/test_installed_wheel.py.
