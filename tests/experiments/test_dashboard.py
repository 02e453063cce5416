"""`evoforge dashboard`: study notes, the served API and artifacts, and the page as a browser renders it."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoforge.dashboard import annotate
from evoforge.report import open_run
from tests.conftest import REPO, cli_main
from tests.experiments.conftest import TASK, make_run

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`evoforge dashboard RUN_DIR --port P` as a user starts it; yields its base URL and the run dir."""
    run_dir = tmp_path_factory.mktemp("dash") / "run"
    make_run(run_dir)
    annotate(open_run(run_dir))  # as the campaign does when it finishes
    (run_dir.parent / "record_before.json").write_text(json.dumps(_record_state(run_dir)))
    port = _free_port()
    log = (run_dir.parent / "dashboard.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "evoforge.cli", "dashboard", str(run_dir), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/studies")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"dashboard did not answer: {(run_dir.parent / 'dashboard.log').read_text()}")
                time.sleep(0.3)
        yield base, run_dir
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _record_state(run_dir: Path) -> dict[str, object]:
    """Everything of the record a viewer could change: each study's attributes and its trials."""
    import optuna

    storage = optuna.storages.RDBStorage(f"sqlite:///{run_dir / 'optuna.db'}")
    out: dict[str, object] = {}
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study_id = storage.get_study_id_from_name(summary.study_name)
        out[summary.study_name] = {
            "system_attrs": storage.get_study_system_attrs(study_id),
            "user_attrs": storage.get_study_user_attrs(study_id),
            "trials": [(t.number, t.state.name, t.value, sorted(t.system_attrs), t.user_attrs)
                       for t in storage.get_all_trials(study_id, deepcopy=False)]}
    return json.loads(json.dumps(out, default=str))


def test_the_dashboard_only_reads_the_record(served: tuple[str, Path]) -> None:
    """A viewer writes nothing into the study: the notes are the campaign's, written when it finishes."""
    base, run_dir = served
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    for s in studies:  # every study opened, as a user clicking through would
        _get(f"{base}/api/studies/{s['study_id']}")
    assert _record_state(run_dir) == json.loads((run_dir.parent / "record_before.json").read_text())


def test_a_trial_shows_its_evaluation_time_and_categorical_choices(served: tuple[str, Path]) -> None:
    base, _ = served
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    study_id = next(s["study_id"] for s in studies if s["study_name"] == "demo/level1/19_ReLU")
    detail = json.loads(_get(f"{base}/api/studies/{study_id}"))
    seed = detail["trials"][0]
    started = dt.datetime.fromisoformat(seed["datetime_start"])
    completed = dt.datetime.fromisoformat(seed["datetime_complete"])
    assert (completed - started).total_seconds() == pytest.approx(0.5, abs=0.01)  # its eval_s, not 0
    block = next(p for p in seed["params"] if p["name"] == "BLOCK")
    assert block["distribution"]["type"] == "CategoricalDistribution"
    assert [c["value"] for c in block["distribution"]["choices"]] == ["256", "512", "1024", "2048"]


def test_notes_describe_each_study_and_keep_a_users_edit(tmp_path: Path) -> None:
    from optuna_dashboard import get_note, save_note

    make_run(tmp_path / "run")
    run = open_run(tmp_path / "run")
    assert annotate(run) == 2
    note = get_note(run.studies[TASK])
    for text in ("# demo / level1/19_ReLU", "interpreter", "arch `cpu`", "torch 2.13.0", "triton 3.6.0",
                 "8 evaluations per task", "strategy `default`", "best speedup **2.5x**", "not representative of a GPU",
                 "from `L1/19`", '"batch_size": 16'):
        assert text in note, text
    assert annotate(open_run(tmp_path / "run")) == 0  # nothing changed: nothing written
    save_note(run.studies[TASK], "my own findings")
    annotate(open_run(tmp_path / "run"))
    assert get_note(run.studies[TASK]) == "my own findings"


def test_bad_run_dir_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = cli_main(capsys, "dashboard", str(tmp_path / "nope"), "--port", str(_free_port()))
    assert done.returncode == 2 and "nope" in done.stderr and done.stderr.strip().count("\n") == 0


def test_api_serves_studies_notes_trials_and_sources(served: tuple[str, Path]) -> None:
    base, run_dir = served
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    by_name = {s["study_name"]: s["study_id"] for s in studies}
    assert set(by_name) == {"demo/level1/19_ReLU", "demo/level1/21_Sigmoid"}
    study_id = by_name["demo/level1/19_ReLU"]
    detail = json.loads(_get(f"{base}/api/studies/{study_id}"))
    assert detail["objective_names"] == ["speedup"]
    assert "Backend / hardware" in detail["note"]["body"]
    assert len(detail["trials"]) == 7
    best = next(t for t in detail["trials"] if dict((a["key"], a["value"]) for a in t["user_attrs"])
                .get("operator") == "llm-optimize")
    artifacts = {a["filename"]: a["artifact_id"] for a in best["artifacts"]}
    assert set(artifacts) == {"source.py", "prompt.md", "reply.md"}
    source = _get(f"{base}/artifacts/{study_id}/{best['trial_id']}/{artifacts['source.py']}").decode()
    candidate_id = dict((a["key"], a["value"]) for a in best["user_attrs"])["candidate_id"]
    assert source == json.loads((run_dir / "candidates" / f"{candidate_id}.json").read_text())["source"]
    assert "make it faster" in _get(f"{base}/artifacts/{study_id}/{best['trial_id']}/{artifacts['prompt.md']}").decode()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (make sysdeps, or apt-get install chromium)")
def test_browser_shows_study_trial_and_artifacts(served: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = served
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    study_id = next(s["study_id"] for s in studies if s["study_name"] == "demo/level1/19_ReLU")
    page = f"{base}/dashboard/studies/{study_id}/trials?numbers=5"

    def chromium(*args: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path / f"profile{len(list(tmp_path.iterdir()))}"
        return subprocess.run([str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=90)

    dom = chromium("--dump-dom", page).stdout
    assert "demo/level1/19_ReLU" in dom
    for text in ("Trial 5", "Best Trial", "llm-optimize", "source.py", "prompt.md", "reply.md"):
        assert text in dom, text
    note = chromium("--dump-dom", f"{base}/dashboard/studies/{study_id}/note").stdout
    assert "Backend / hardware" in note and "not representative of a GPU" in note

    shot = tmp_path / "trial.png"
    chromium(f"--screenshot={shot}", "--window-size=1400,1000", page)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
