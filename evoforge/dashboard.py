"""``evoforge dashboard RUN_DIR``: optuna-dashboard on a run's record, with its artifacts.

Every trial's source (and an LLM child's prompt and reply) is an Optuna artifact in ``RUN_DIR/artifacts``;
serving the dashboard with that artifact store makes each one open in the browser. Each study carries a
Markdown note saying what it is (campaign, task, hardware, versions, budget) and how to read it, so a study
seen on its own in a shared PostgreSQL record still explains itself. The campaign writes the notes (``annotate``,
when it finishes): the dashboard is a viewer and writes nothing into the record.

optuna-dashboard itself edits what it shows (its trash icon deletes a study and every artifact of it; notes,
user attributes, uploads, renames, tells). ``serve`` puts two walls in front of the record: a WSGI middleware
that lets through only reading methods (``read_only``: refused by method, not by route, so a write route a
later optuna-dashboard adds is refused too), and the storage and artifact store opened for reading
(``read_only_storage``: SQLite in ``mode=ro``, PostgreSQL in read-only transactions; ``ReadOnlyArtifactStore``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import optuna
import pandas as pd

from evoforge.core import UsageError
from evoforge.report import INTERPRETER_NOTE, RunRecord, open_run, task_stats

NOTE_ATTR = "evoforge:note"  # study system attribute: the note as evoforge last wrote it


def study_note(run: RunRecord, task: str) -> str:
    """The Markdown note of one study (the dashboard renders it above the study's charts)."""
    cfg = run.config
    llm = cfg.get("llm") or {}
    df = run.trials.get(task, pd.DataFrame())
    stats = task_stats(df) if not df.empty else {}
    versions: dict[str, str] = {}
    devices: set[str] = set()
    if not df.empty:
        for v in df["versions"]:
            if isinstance(v, dict):
                versions.update({k: str(x) for k, x in v.items()})
        devices.update(d for d in df["device_name"] if isinstance(d, str) and d)
    task_cfg = _task_config(cfg, task)
    statuses = df["status"].value_counts().to_dict() if not df.empty else {}
    best = stats.get("best_speedup")
    model = llm.get("model") or ", ".join(str(m.get("name", "?")) for m in llm.get("models", [])) or "none"
    lines = [
        f"# {run.campaign or run.run_dir.name} / {task}",
        "",
        f"- **Campaign**: `{run.campaign}` (run directory `{run.run_dir.resolve()}`)",
        f"- **Task**: `{task}`" + (f" from `{task_cfg.get('spec')}`" if task_cfg.get("spec") else "")
        + (f", constants {json.dumps(task_cfg['set'])}" if task_cfg.get("set") else ""),
        f"- **Backend / hardware**: {cfg.get('backend', '?')}, arch `{cfg.get('arch', '?')}`"
        + (f", device {', '.join(sorted(devices))}" if devices else ""),
        f"- **Versions**: {', '.join(f'{k} {v}' for k, v in sorted(versions.items())) or 'not recorded'}",
        f"- **Budget**: {cfg.get('budget_evals', '?')} evaluations per task"
        + (f", {cfg['budget_minutes']} minutes for the campaign" if cfg.get("budget_minutes") else "")
        + f"; strategy `{cfg.get('strategy', '?')}`, operators {', '.join(cfg.get('operators', [])) or '-'}"
        + f", knowledge base {'on' if cfg.get('knowledge', True) else 'off'}, LLM {model}, seed {cfg.get('seed', '?')}",
        f"- **So far**: {len(df)} evaluations ("
        + (", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "none") + ")"
        + (f"; best speedup **{best:.4g}x** by `{stats.get('best_operator')}`" if best is not None else
           "; no correct kernel yet"),
        "",
        "**Reading it.** The objective `speedup` is the PyTorch reference's time over the kernel's on the same "
        "device (higher is better). A failed candidate is a FAIL trial with no value: its user attribute "
        "`status` says how it failed (invalid, rejected, compile_error, runtime_error, incorrect, timeout, "
        "crashed) and `message` why. `operator`, `stage` and `parents` give each child's lineage; the "
        "artifacts hold the candidate's `source.py` and, for LLM children, `prompt.md` and `reply.md`.",
    ]
    if (df.get("timing_representative", pd.Series(dtype=object)) == False).any():  # noqa: E712
        lines += ["", f"> **Note**: {INTERPRETER_NOTE}"]
    lines += ["", f"Report: `evoforge report {run.run_dir}`. This note is rewritten by the campaign each time it "
              "finishes (or is resumed), unless you have edited it here."]
    return "\n".join(lines) + "\n"


def _task_config(cfg: dict[str, Any], task: str) -> dict[str, Any]:
    """The [[tasks]] entry of a study's task, matched by the file its spec names (best effort)."""
    from evoforge.task import resolve_task_path, task_name

    for entry in cfg.get("tasks", []):
        spec = str(entry.get("spec", ""))
        try:
            if task_name(resolve_task_path(spec)) == task:
                return entry
        except UsageError:  # the task file is not on this machine (a record read elsewhere)
            if Path(spec).stem == task.split("/")[-1]:
                return entry
    return {}


def annotate(run: RunRecord) -> int:
    """Give every study of the run its note and objective name; returns how many notes changed."""
    from optuna_dashboard import get_note, save_note

    changed = 0
    for task, study in run.studies.items():
        if study.metric_names != ["speedup"]:
            study.set_metric_names(["speedup"])
        text = study_note(run, task)
        current = get_note(study)
        ours = run.storage.get_study_system_attrs(study._study_id).get(NOTE_ATTR)
        if current and current != ours:
            continue  # a note somebody wrote or edited in the dashboard is theirs; leave it
        if current != text:
            save_note(study, text)
            run.storage.set_study_system_attr(study._study_id, NOTE_ATTR, text)
            changed += 1
    return changed


READING_METHODS = frozenset({"GET", "HEAD"})
# Headers and the query parameter with which web frameworks let a GET or POST stand for another method.
METHOD_OVERRIDE_HEADERS = ("HTTP_X_HTTP_METHOD_OVERRIDE", "HTTP_X_HTTP_METHOD", "HTTP_X_METHOD_OVERRIDE")
READ_ONLY_REASON = ("evoforge dashboard is read-only: the record and the kernels' sources in it are the "
                    "campaign's and are never changed from here (open the study with Optuna in Python to edit it)")


def read_only(app: WSGIApplication) -> WSGIApplication:
    """``app`` answering only requests that read: any other method (and a GET or POST that asks to stand for
    another method) gets 403 with the reason as JSON (under ``reason``, where optuna-dashboard reads an error)."""

    def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        asked = [str(environ.get("REQUEST_METHOD", ""))]
        asked += [str(environ[h]) for h in METHOD_OVERRIDE_HEADERS if h in environ]
        asked += parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True).get("_method", [])
        if all(m.strip().upper() in READING_METHODS for m in asked):
            return app(environ, start_response)
        body = json.dumps({"reason": READ_ONLY_REASON}).encode()
        start_response("403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                         ("Allow", "GET, HEAD")])
        return [body]

    return guarded


class ReadOnlyArtifactStore:
    """Optuna's artifact store protocol over ``store``, reading only: a write or removal that got past
    ``read_only`` still leaves the sources on disk as they are."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def open_reader(self, artifact_id: str) -> IO[bytes]:
        return self._store.open_reader(artifact_id)

    def write(self, artifact_id: str, content_body: IO[bytes]) -> None:
        raise PermissionError(READ_ONLY_REASON)

    def remove(self, artifact_id: str) -> None:
        raise PermissionError(READ_ONLY_REASON)


def read_only_storage(url: str) -> optuna.storages.BaseStorage:
    """The run's storage opened so that the database itself refuses writes where it can: SQLite through a
    ``mode=ro`` URI (the path percent-encoded: a raw ``?`` or ``#`` in it would end the path and open another
    file read-write), PostgreSQL with ``default_transaction_read_only``; any other database as it is."""
    import sqlite3
    from urllib.parse import quote

    from evoforge.search.store import open_storage

    if url.startswith("sqlite:///"):
        uri = f"file:{quote(str(Path(url[len('sqlite:///'):]).resolve()))}?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False)

        return optuna.storages.RDBStorage("sqlite://", engine_kwargs={"creator": connect})
    if url.startswith(("postgresql:", "postgresql+psycopg2:", "postgresql+psycopg:")):
        return optuna.storages.RDBStorage(url, engine_kwargs={
            "pool_pre_ping": True, "connect_args": {"options": "-c default_transaction_read_only=on"}})
    return open_storage(url)


def serve(run_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve optuna-dashboard on the run's storage until interrupted; the record is only read."""
    try:
        import bottle
        from optuna_dashboard import wsgi
    except ImportError:
        raise UsageError("evoforge dashboard needs optuna-dashboard: pip install 'evoforge[dashboard]' "
                         "(or pip install optuna-dashboard)") from None
    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: not a TCP port (1-65535)")
    run = open_run(run_dir)
    artifacts = run.run_dir / "artifacts"
    store = ReadOnlyArtifactStore(optuna.artifacts.FileSystemArtifactStore(str(artifacts)))
    app = read_only(wsgi(read_only_storage(run.storage_url), artifact_store=store))
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    print(f"evoforge dashboard: {len(run.studies)} studies of campaign {run.campaign!r} at "
          f"http://{shown_host}:{port}/dashboard/ (read-only; Ctrl-C to stop)", flush=True)
    try:
        bottle.run(app, host=host, port=port)  # what optuna_dashboard.run_server does with its own app
    except OSError as e:
        raise UsageError(f"--host {host} --port {port}: cannot listen ({e.strerror or e}); "
                         "choose another --port") from None
