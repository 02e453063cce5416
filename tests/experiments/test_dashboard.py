"""`evoforge dashboard`: study notes, the served API and artifacts, and the page as a browser renders it."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
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


def _ask(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One HTTP request as a browser or a script would send it: the status and the body, errors included."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _file_hashes(run_dir: Path) -> dict[str, str]:
    """The record (optuna.db) and every stored source (artifacts/), byte for byte."""
    files = [run_dir / "optuna.db", *sorted((run_dir / "artifacts").rglob("*"))]
    return {str(f.relative_to(run_dir)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


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


def test_every_request_that_would_change_the_record_is_refused(served: tuple[str, Path]) -> None:
    """optuna-dashboard's trash icon (DELETE /api/studies/ID) removed the run's kernel sources and left the study
    broken. Every writing route of optuna-dashboard, and the ways around a guard by route (a trailing slash, other
    case, a lower-case method, a method-override header or parameter, verbs it has no route for), gets 403 and
    changes nothing: optuna.db and the artifacts stay byte for byte, and the study reads as before."""
    base, run_dir = served
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    sid = next(s["study_id"] for s in studies if s["study_name"] == "demo/level1/19_ReLU")
    detail = json.loads(_get(f"{base}/api/studies/{sid}"))
    trial = next(t for t in detail["trials"] if t["artifacts"])
    tid, aid = trial["trial_id"], trial["artifacts"][0]["artifact_id"]
    source = _get(f"{base}/artifacts/{sid}/{tid}/{aid}")
    before = _file_hashes(run_dir)
    assert f"artifacts/{aid}" in before
    note = json.dumps({"version": 1, "body": "overwritten"}).encode()
    upload = json.dumps({"file": "data:text/plain;base64,eA==", "filename": "x.py"}).encode()
    writes = [
        ("DELETE", f"/api/studies/{sid}", None, {}),  # the trash icon
        ("DELETE", f"/api/artifacts/{sid}/{tid}/{aid}", None, {}),
        ("DELETE", f"/api/artifacts/{sid}/{aid}", None, {}),
        ("POST", f"/api/artifacts/{sid}/{tid}", upload, {}),
        ("POST", f"/api/artifacts/{sid}", upload, {}),
        ("PUT", f"/api/studies/{sid}/note", note, {}),
        ("PUT", f"/api/studies/{sid}/{tid}/note", note, {}),
        ("POST", "/api/studies", json.dumps({"study_name": "new", "directions": ["maximize"]}).encode(), {}),
        ("POST", f"/api/studies/{sid}/rename", json.dumps({"study_name": "renamed"}).encode(), {}),
        ("POST", f"/api/trials/{tid}/tell", json.dumps({"state": "Fail"}).encode(), {}),
        ("POST", f"/api/trials/{tid}/user-attrs", json.dumps({"user_attrs": {"status": "ok"}}).encode(), {}),
        ("POST", f"/api/studies/{sid}/{tid}/skip", None, {}),
        ("POST", f"/api/studies/{sid}/preference", json.dumps({"candidates": [0], "clicked": 0, "mode": "ChooseWorst"}).encode(), {}),
        ("PUT", f"/api/studies/{sid}/preference_feedback_component", json.dumps({"output_type": "note"}).encode(), {}),
        ("DELETE", f"/api/studies/{sid}/preference/00000000", None, {}),
        ("POST", "/incompatible-rdb-schema", None, {}),  # optuna-dashboard's schema migration
        # Ways around a guard that looks at routes or at the method's spelling.
        ("DELETE", f"/api/studies/{sid}/", None, {}),
        ("DELETE", f"/API/Studies/{sid}", None, {}),
        ("delete", f"/api/studies/{sid}", None, {}),  # the dashboard's router upper-cases the method
        ("PATCH", f"/api/studies/{sid}", note, {}),
        ("OPTIONS", f"/api/studies/{sid}", None, {}),
        ("PURGE", "/api/studies", None, {}),
        ("GET", f"/api/studies/{sid}", None, {"X-HTTP-Method-Override": "DELETE"}),
        ("GET", f"/api/studies/{sid}", None, {"X-HTTP-Method": "delete"}),
        ("POST", f"/api/studies/{sid}", None, {"X-HTTP-Method-Override": "GET"}),
        ("GET", f"/api/studies/{sid}?_method=DELETE", None, {}),
    ]
    for method, path, body, headers in writes:
        status, answer = _ask(method, base + path, body, {"Content-Type": "application/json", **headers})
        assert status == 403, (method, path, headers, status, answer[:200])
        if method != "HEAD":
            assert "read-only" in json.loads(answer)["reason"], (method, path)
    assert _file_hashes(run_dir) == before
    assert _record_state(run_dir) == json.loads((run_dir.parent / "record_before.json").read_text())
    again = json.loads(_get(f"{base}/api/studies/{sid}"))
    assert len(again["trials"]) == 7 and again["note"]["body"] == detail["note"]["body"]
    assert _get(f"{base}/artifacts/{sid}/{tid}/{aid}") == source
    # What a viewer does still works, HEAD included.
    assert _ask("HEAD", f"{base}/api/studies/{sid}")[0] == 200
    assert _ask("HEAD", f"{base}/artifacts/{sid}/{tid}/{aid}")[0] == 200
    assert _ask("GET", f"{base}/csv/{sid}")[0] == 200
    assert b"<html" in _get(f"{base}/dashboard/studies/{sid}").lower()


def test_the_served_storage_and_artifacts_refuse_writes_themselves(run_dir: Path) -> None:
    """The second wall, for a write that got past the method check: the storage the dashboard is served from is
    opened read-only (SQLite mode=ro), and its artifact store has no write or removal."""
    import optuna

    from evoforge.dashboard import ReadOnlyArtifactStore, read_only_storage

    before = _file_hashes(run_dir)
    storage = read_only_storage(f"sqlite:///{run_dir / 'optuna.db'}")
    assert len(optuna.load_study(study_name=f"demo/{TASK}", storage=storage).trials) == 7
    with pytest.raises(optuna.exceptions.StorageInternalError) as refused:
        optuna.delete_study(study_name=f"demo/{TASK}", storage=storage)
    assert "readonly database" in str(refused.value.__cause__)
    store = ReadOnlyArtifactStore(optuna.artifacts.FileSystemArtifactStore(str(run_dir / "artifacts")))
    aid = next(iter((run_dir / "artifacts").iterdir())).name
    assert store.open_reader(aid).read()
    with pytest.raises(PermissionError):
        store.remove(aid)
    with pytest.raises(PermissionError):
        store.write(aid, io.BytesIO(b"replaced"))
    assert _file_hashes(run_dir) == before


def test_read_only_sqlite_opens_the_run_s_file_whatever_its_path(run_dir: Path, tmp_path: Path) -> None:
    """A record copied into a folder whose name holds `?`, `#` or `%`: a file: URI written naively ends the path
    at `?` or `#` (SQLite then opens, and creates, another database read-write) or decodes `%41` to `A`."""
    import shutil

    import optuna

    from evoforge.dashboard import read_only_storage

    odd = tmp_path / "copied ?mode=rw#1 %41"
    odd.mkdir()
    shutil.copy(run_dir / "optuna.db", odd / "optuna.db")
    before = sorted(p.name for p in tmp_path.iterdir())
    storage = read_only_storage(f"sqlite:///{odd / 'optuna.db'}")
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    assert names == {f"demo/{TASK}", "demo/level1/21_Sigmoid"}
    with pytest.raises(optuna.exceptions.StorageInternalError) as refused:
        optuna.delete_study(study_name=f"demo/{TASK}", storage=storage)
    assert "readonly database" in str(refused.value.__cause__)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no stray database made beside it


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


def test_a_postgresql_record_is_served_in_read_only_transactions(postgres_url: str) -> None:
    """A campaign recorded in PostgreSQL (a cluster's shared record) is read through transactions the server
    itself keeps read-only."""
    import optuna

    from evoforge.dashboard import read_only_storage

    study = optuna.create_study(study_name="pg/level1/19_ReLU", storage=postgres_url, direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=1.5, params={}, distributions={}))
    storage = read_only_storage(postgres_url)
    assert optuna.load_study(study_name="pg/level1/19_ReLU", storage=storage).best_value == 1.5
    with pytest.raises(optuna.exceptions.StorageInternalError) as refused:
        optuna.delete_study(study_name="pg/level1/19_ReLU", storage=storage)
    assert "read-only transaction" in str(refused.value.__cause__)
    assert len(optuna.load_study(study_name="pg/level1/19_ReLU", storage=postgres_url).trials) == 1
