"""``evoforge report``: one self-contained HTML page per run (or per ablation) that a reader opens with no server.

Everything is read back through Optuna's API from the run's storage (the URL in ``config.json``, else
``RUN_DIR/optuna.db``) plus the candidate files the store writes beside it, so a report can be made while a
campaign is still running and from a PostgreSQL record as well as from SQLite. Figures are drawn with
matplotlib's Agg canvas (no display, no pyplot state) and written as PNG and SVG beside ``index.html``.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from optuna.trial import TrialState

from evoforge import ablation_stats as ab
from evoforge.core import Candidate, UsageError
from evoforge.search.store import RESULT_ATTR

INTERPRETER_NOTE = ("Times come from the Triton interpreter on the CPU (timing_representative false): "
                    "not representative of a GPU. They show that the search works and the kernels are "
                    "correct, not how fast they run on a device.")

# Columns every trial row has, whatever the writer's version recorded (missing ones are filled with None).
TRIAL_COLUMNS = ("number", "state", "value", "status", "message", "operator", "stage", "parents", "candidate_id",
                 "structure_id", "runtime_ms", "ref_ms", "speedup", "pct_of_floor", "below_floor",
                 "timing_representative", "backend", "arch", "eval_s", "cached", "params", "wall_time_s",
                 "evaluation", "worker", "model", "prompt_tokens", "completion_tokens", "cost_usd")

# The user attributes the report and the dashboard's notes read (the rest of TRIAL_COLUMNS stays None in their
# tables): a trial's message (up to 4 KB), parameters and lineage are read from its candidate where shown.
SHOWN_COLUMNS = ("status", "operator", "candidate_id", "runtime_ms", "ref_ms", "speedup", "pct_of_floor",
                 "below_floor", "timing_representative", "wall_time_s", "prompt_tokens", "completion_tokens")
STATUS_ROWS = 40  # tasks drawn in the outcomes figure; the table beside it lists every task

STATUS_COLOURS = {"ok": "#2e7d32", "incorrect": "#c62828", "compile_error": "#ef6c00", "runtime_error": "#f9a825",
                  "rejected": "#6a1b9a", "invalid": "#546e7a", "timeout": "#1565c0", "crashed": "#000000"}


# ---------------------------------------------------------------------------------------------- reading a run
@dataclass
class RunRecord:
    """A run directory read back: its config, its summary (if finished) and one trial table per task."""

    run_dir: Path
    campaign: str
    storage_url: str
    config: dict[str, Any]
    summary: dict[str, Any] | None
    storage: optuna.storages.BaseStorage
    studies: dict[str, optuna.Study] = field(default_factory=dict)  # task name -> study
    trials: dict[str, pd.DataFrame] = field(default_factory=dict)  # task name -> one row per finished trial

    def load_candidate(self, candidate_id: str) -> Candidate | None:
        path = self.run_dir / "candidates" / f"{candidate_id}.json"
        try:
            return Candidate.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def storage_url_of(run_dir: Path, config: dict[str, Any] | None) -> str:
    """The run's Optuna storage: ``storage`` from its resolved config, else the SQLite file beside it."""
    url = (config or {}).get("storage") or ""
    return url or f"sqlite:///{(run_dir / 'optuna.db').resolve()}"


def open_run(run_dir: str | Path, *, columns: tuple[str, ...] | None = None) -> RunRecord:
    """Read a run directory through Optuna's API. A path that is not a run is one UsageError line.

    The trial tables are read in bulk (``search.record_rows``: one query per table for every study of the
    campaign), not a ``FrozenTrial`` per trial: a 100k-trial record opens in seconds. ``columns`` limits the user
    attributes read to those (``SHOWN_COLUMNS`` is what the report and the dashboard's notes show); None reads
    them all."""
    from evoforge.search import record_rows
    from evoforge.search.store import open_storage

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"RUN_DIR {run_dir}: no such directory")
    config = _read_json(run_dir / "config.json")
    if config is None and not (run_dir / "optuna.db").is_file():
        raise UsageError(f"RUN_DIR {run_dir}: not a run directory (no config.json or optuna.db; "
                         "give the --out folder of an `evoforge run`)")
    url = storage_url_of(run_dir, config)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        raise UsageError(f"RUN_DIR {run_dir}: its record {url[len('sqlite:///'):]} does not exist (no trial "
                         "was recorded yet)")
    storage = open_storage(url)
    campaign = str((config or {}).get("name") or "")
    record = RunRecord(run_dir=run_dir, campaign=campaign, storage_url=url, config=config or {},
                       summary=_read_json(run_dir / "summary.json"), storage=storage)
    prefix = f"{campaign}/" if campaign else ""
    ids = record_rows.campaign_study_ids(storage, prefix)
    names = sorted(ids)
    ordered = _task_order(record.summary, [n[len(prefix):] for n in names])
    rows = record_rows.read_trials(storage, ids.values(), user_keys=columns, system_keys=[RESULT_ATTR])
    for task in ordered:
        study = optuna.Study(study_name=prefix + task, storage=storage)  # no look-up per study: the id is known
        record.studies[task] = study
        record.trials[task] = _frame(rows[ids[prefix + task]])
    if not record.studies:
        all_names = sorted(record_rows.campaign_study_ids(storage, ""))
        raise UsageError(f"RUN_DIR {run_dir}: the record holds no study of campaign {campaign!r} "
                         f"({'studies: ' + ', '.join(all_names[:5]) if all_names else 'it is empty'})")
    return record


def _task_order(summary: dict[str, Any] | None, tasks: list[str]) -> list[str]:
    """Tasks in the campaign's order (its summary lists them as the config did), the rest sorted."""
    listed = [t for t in (summary or {}).get("tasks", {}) if t in tasks]
    return listed + sorted(set(tasks) - set(listed))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per finished trial (COMPLETE or FAIL) with the evoforge user attributes as columns, in the
    order they were recorded; ``position`` is the 1-based evaluation count at that trial."""
    from evoforge.search import record_rows

    if record_rows.is_rdb(study._storage):
        return _frame(record_rows.read_trials(study._storage, [study._study_id],
                                              system_keys=[RESULT_ATTR])[study._study_id])
    return _frame([record_rows.TrialRow(study_id=study._study_id, trial_id=t._trial_id, number=t.number,
                                        state=t.state, value=t.value, user_attrs=dict(t.user_attrs),
                                        system_attrs=dict(t.system_attrs))
                   for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))])


def _frame(trials: list[Any]) -> pd.DataFrame:
    """The trial table of one study from its ``record_rows.TrialRow``\\ s."""
    rows = []
    for t in trials:
        row: dict[str, Any] = dict.fromkeys(TRIAL_COLUMNS)
        row.update(t.user_attrs)
        row.update(number=t.number, state=t.state.name, value=t.value)
        raw = t.system_attrs.get(RESULT_ATTR)
        result = json.loads(raw) if isinstance(raw, str) else {}
        row["device_name"] = result.get("device_name", "")
        row["versions"] = result.get("versions") or {}
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*TRIAL_COLUMNS, "device_name", "versions"] if not rows else None)
    if df.empty:
        return df.assign(position=pd.Series(dtype=int))
    df = df.sort_values("number", kind="stable").reset_index(drop=True)
    df["position"] = range(1, len(df) + 1)
    for col in ("speedup", "runtime_ms", "ref_ms", "pct_of_floor", "wall_time_s", "value"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def _counted_ok(df: pd.DataFrame) -> pd.Series:
    """Correct trials with a speedup that counts: a time below the physical floor is flagged, not celebrated."""
    if df.empty:
        return pd.Series(dtype=bool)
    below = df["below_floor"].fillna(False).astype(bool)
    return (df["status"] == "ok") & df["speedup"].notna() & ~below


def task_stats(df: pd.DataFrame) -> dict[str, Any]:
    """The leaderboard row of one task, from its trial table."""
    ok = df[_counted_ok(df)] if not df.empty else df
    stats: dict[str, Any] = {
        "evaluations": len(df), "correct_trials": int((df["status"] == "ok").sum()) if not df.empty else 0,
        "best_speedup": None, "best_runtime_ms": None, "ref_ms": None, "pct_of_floor": None,
        "best_operator": None, "best_candidate_id": None, "timing_representative": None,
        "evals_to_first_correct": None, "tokens": 0, "wall_s": None,
        "below_floor": int(df["below_floor"].fillna(False).astype(bool).sum()) if not df.empty else 0,
    }
    if df.empty:
        return stats
    tokens = sum(pd.to_numeric(df[c], errors="coerce").fillna(0).sum() for c in ("prompt_tokens",
                                                                                   "completion_tokens"))
    stats["tokens"] = int(tokens)
    wall = df["wall_time_s"].dropna()
    stats["wall_s"] = float(wall.max()) if not wall.empty else None
    correct = df[df["status"] == "ok"]
    if not correct.empty:
        stats["evals_to_first_correct"] = int(correct["position"].iloc[0])
    if not ok.empty:
        best = ok.loc[ok["speedup"].idxmax()]
        stats.update(best_speedup=float(best["speedup"]), best_runtime_ms=_num(best["runtime_ms"]),
                     ref_ms=_num(best["ref_ms"]), pct_of_floor=_num(best["pct_of_floor"]),
                     best_operator=best["operator"], best_candidate_id=best["candidate_id"],
                     timing_representative=None if best["timing_representative"] is None
                     else bool(best["timing_representative"]))
    return stats


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def leaderboard(run: RunRecord) -> pd.DataFrame:
    rows = [{"task": task, **task_stats(df)} for task, df in run.trials.items()]
    return pd.DataFrame(rows)


def task_reasons(run: RunRecord, kind: str) -> dict[str, str]:
    """Why tasks did not run their budget, as the campaign's ``summary.json`` says: ``kind`` "not_started"
    (tasks with no way in, which have no study) or "stopped_early" (tasks that stopped before their budget)."""
    summary = run.summary or {}
    if kind == "not_started":
        reasons = summary.get("not_started") or {}
    else:
        reasons = {t: s.get(kind) for t, s in (summary.get("tasks") or {}).items() if isinstance(s, dict)}
    return {str(t): str(why) for t, why in reasons.items() if why}


def best_so_far(df: pd.DataFrame) -> pd.Series:
    """Best counted speedup after each evaluation (NaN until the first correct one)."""
    speed = df["speedup"].where(_counted_ok(df))
    return speed.cummax().ffill()


def campaign_time(wall: pd.Series) -> pd.Series:
    """Wall time on one clock across sessions: a run continued into the same record without ``--resume``
    starts its clock at 0 again, so each restart is shifted to follow the previous session's last time."""
    offset, previous, out = 0.0, None, []
    for w in wall:
        if pd.isna(w):
            out.append(math.nan)
            continue
        if previous is not None and w < previous:
            offset += previous
        previous = float(w)
        out.append(w + offset)
    return pd.Series(out, index=wall.index, dtype=float)


def lineage(run: RunRecord, task: str, candidate_id: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """The chain from the seed to ``candidate_id`` through each candidate's first parent, seed first.

    Each step carries the operator that made it, its stage, and the outcome of its evaluation in this task's
    record (a parent may have failed: a repair's parent did); crossovers list their other parents.
    """
    df = run.trials.get(task, pd.DataFrame())
    outcome: dict[str, dict[str, Any]] = {}
    for _, row in df.iterrows():
        cid = row["candidate_id"]
        if cid not in outcome or (row["status"] == "ok" and outcome[cid]["status"] != "ok"):
            outcome[cid] = {"status": row["status"], "speedup": _num(row["speedup"]), "trial": int(row["number"])}
    steps: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: str | None = candidate_id
    while current and current not in seen and len(steps) < limit:
        seen.add(current)
        candidate = run.load_candidate(current)
        info = outcome.get(current, {"status": "not evaluated", "speedup": None, "trial": None})
        step = {"candidate_id": current, **info, "operator": candidate.operator if candidate else "?",
                "stage": candidate.stage if candidate else "", "params": candidate.params if candidate else {},
                "other_parents": list(candidate.parents[1:]) if candidate else []}
        steps.append(step)
        current = candidate.parents[0] if candidate and candidate.parents else None
        if candidate is None:
            step["operator"] = "? (candidate file missing)"
    return list(reversed(steps))


def best_source(run: RunRecord, candidate_id: str) -> str | None:
    """The best kernel as a standalone module: its source with the tuned parameters baked in."""
    from evoforge.export import bake_params

    candidate = run.load_candidate(candidate_id)
    if candidate is None:
        return None
    try:
        return bake_params(candidate.source, candidate.params)
    except SyntaxError:
        return candidate.source


# ---------------------------------------------------------------------------------------------- figures
def _save(fig: Figure, out_dir: Path, stem: str) -> str:
    """Write PNG and SVG beside the page; return the PNG's relative name."""
    FigureCanvasAgg(fig)
    fig.savefig(out_dir / f"{stem}.png", dpi=110, bbox_inches="tight")
    fig.savefig(out_dir / f"{stem}.svg", bbox_inches="tight", metadata={"Date": None})
    return f"{stem}.png"


def _label(task: str) -> str:
    return task.split("/")[-1]


def _speedup_axis(ax: Any, values: list[float]) -> None:
    """Log scale when speedups span a decade or sit far below 1x (interpreter times); the 1x reference line
    only where it does not squash the curves into a flat line."""
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite:
        ax.axhline(1.0, color="grey", ls="--", lw=0.8)
        return
    lo, hi = min(finite), max(finite)
    if hi / lo > 10 or hi < 0.5:
        ax.set_yscale("log")
    if lo / 1.5 <= 1.0 <= hi * 1.5:
        ax.axhline(1.0, color="grey", ls="--", lw=0.8, label="reference (1x)")


def plot_convergence(run: RunRecord, out_dir: Path) -> str:
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_evals, ax_wall = fig.subplots(1, 2)
    many = len(run.trials) > 12
    values: list[float] = []
    for task, df in run.trials.items():
        if df.empty:
            continue
        curve = best_so_far(df)
        values += [float(v) for v in curve.dropna()]
        ax_evals.step(df["position"], curve, where="post", label=_label(task), lw=1.6)
        wall = campaign_time(df["wall_time_s"])
        if wall.notna().any():
            ax_wall.step(wall, curve, where="post", label=_label(task), lw=1.6)
    for ax, xlabel in ((ax_evals, "evaluations"), (ax_wall, "wall time (s)")):
        _speedup_axis(ax, values)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best speedup so far (x)")
        ax.grid(alpha=0.3, which="both")
    ax_evals.set_title("best speedup vs evaluations")
    ax_wall.set_title("best speedup vs wall time")
    if not many and ax_evals.get_legend_handles_labels()[0]:
        ax_evals.legend(fontsize=8)
    return _save(fig, out_dir, "convergence")


def plot_statuses(counts: pd.DataFrame, out_dir: Path) -> str:
    fig = Figure(figsize=(9, 0.45 * len(counts) + 1.6), layout="constrained")
    ax = fig.subplots()
    left = pd.Series(0, index=counts.index, dtype=float)
    labels = [_label(t) for t in counts.index]
    for status in counts.columns:
        ax.barh(labels, counts[status], left=left, label=status, color=STATUS_COLOURS.get(status))
        left += counts[status]
    ax.set_xlabel("evaluations")
    ax.set_title("outcome of every evaluation")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out_dir, "statuses")


# ---------------------------------------------------------------------------------------------- HTML
CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.6em 1em;margin:1em 0}
.meta{color:#555;font-size:.92em}.meta td{text-align:left}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:1em;overflow-x:auto;font-size:.85em}
.chain{display:flex;flex-wrap:wrap;align-items:center;gap:.3em;margin:.5em 0}
.step{border:1px solid #bbb;border-radius:6px;padding:.3em .6em;background:#fafafa;font-size:.88em}
.step.ok{border-color:#2e7d32}.step.fail{border-color:#c62828;background:#fdecea}
.arrow{color:#888}img{max-width:100%}
"""


def _fmt(value: Any, spec: str = ".3g", suffix: str = "") -> str:
    f = _num(value)
    return "–" if f is None else f"{f:{spec}}{suffix}"


def _table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, na_rep="–", border=0)


def _page(title: str, body: list[str]) -> str:
    stamp = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            + "\n".join(body) + f"\n<p class=\"meta\">Made by evoforge report, {stamp}.</p>\n</body></html>\n")


def _figure(png: str, alt: str) -> str:
    svg = png[:-4] + ".svg"
    return (f'<p><a href="{html.escape(svg)}"><img src="{html.escape(png)}" alt="{html.escape(alt)}"></a><br>'
            f'<span class="meta">Vector: <a href="{html.escape(svg)}">{html.escape(svg)}</a></span></p>')


def _meta_table(run: RunRecord) -> str:
    from evoforge.search.store import redact_url

    cfg = run.config
    llm = cfg.get("llm") or {}
    versions: dict[str, str] = {}
    devices: set[str] = set()
    for df in run.trials.values():
        for v in df.get("versions", pd.Series(dtype=object)):
            if isinstance(v, dict):
                versions.update({k: str(x) for k, x in v.items()})
        devices.update(d for d in df.get("device_name", pd.Series(dtype=object)) if isinstance(d, str) and d)
    elapsed = (run.summary or {}).get("elapsed_s")
    if elapsed is None:
        walls = [s for df in run.trials.values() for s in df["wall_time_s"].dropna()] if run.trials else []
        elapsed = max(walls) if walls else None
    rows = [
        ("campaign", run.campaign or "(no config.json)"),
        ("state", "finished (summary.json written)" if run.summary else "running or interrupted (no summary.json)"),
        ("backend / arch", f"{cfg.get('backend', '?')} / {cfg.get('arch', '?')}"),
        ("device", ", ".join(sorted(devices)) or "–"),
        ("strategy", str(cfg.get("strategy", "?"))),
        ("operators", ", ".join(cfg.get("operators", [])) or "–"),
        ("knowledge base", str(cfg.get("knowledge", "?"))),
        ("budget", f"{cfg.get('budget_evals', '?')} evaluations per task"
                   + (f", {cfg['budget_minutes']} minutes" if cfg.get("budget_minutes") else "")),
        ("LLM", (llm.get("model") or ", ".join(m.get("name", "?") for m in llm.get("models", []))) or "none"),
        ("seed", str(cfg.get("seed", "?"))),
        ("elapsed", _fmt(elapsed, ".1f", " s")),
        ("record", redact_url(run.storage_url)),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "–"),
    ]
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="meta">{cells}</table>'


def _lineage_html(steps: list[dict[str, Any]]) -> str:
    parts = []
    for i, s in enumerate(steps):
        ok = s["status"] == "ok"
        speed = f"{s['speedup']:.3g}x" if s.get("speedup") is not None else html.escape(str(s["status"]))
        extra = f" +{len(s['other_parents'])} parent(s)" if s.get("other_parents") else ""
        title = html.escape(f"candidate {s['candidate_id']} trial {s.get('trial')} params {s.get('params')}")
        parts.append(f'<span class="step {"ok" if ok else "fail"}" title="{title}"><b>'
                     f'{html.escape(str(s["operator"]))}</b>'
                     + (f" <i>{html.escape(str(s['stage']))}</i>" if s.get("stage") else "")
                     + f"<br>{speed}{html.escape(extra)}</span>")
        if i < len(steps) - 1:
            parts.append('<span class="arrow">→</span>')
    rows = pd.DataFrame([{"step": i, "operator": s["operator"], "stage": s["stage"] or "–", "status": s["status"],
                          "speedup": _fmt(s["speedup"], ".4g", "x"), "trial": s["trial"],
                          "candidate": s["candidate_id"],
                          "params": json.dumps(s["params"], sort_keys=True, default=str)}
                         for i, s in enumerate(steps)])
    return f'<div class="chain">{"".join(parts)}</div>' + _table(rows)


def write_run_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``RUN_DIR/report/index.html`` (and its figures); returns the page's path."""
    run = open_run(run_dir, columns=SHOWN_COLUMNS)
    out = Path(out_dir) if out_dir else run.run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    board = leaderboard(run)
    body = [_meta_table(run)]
    interpreted = any((df["timing_representative"] == False).any()  # noqa: E712 (a column of objects)
                      for df in run.trials.values() if not df.empty)
    if interpreted:
        body.append(f'<p class="note"><b>Note:</b> {html.escape(INTERPRETER_NOTE)}</p>')
    if int(board["below_floor"].sum()):
        body.append('<p class="note">Some timings were below the physical floor of their task (bytes over '
                    'measured bandwidth or FLOPs over peak): they are impossible, flagged, and left out of the '
                    'best speedups.</p>')

    body.append("<h2>Leaderboard</h2>")
    shown = pd.DataFrame({
        "task": board["task"],
        "best speedup": [_fmt(v, ".3g", "x") for v in board["best_speedup"]],
        "runtime ms": [_fmt(v, ".4g") for v in board["best_runtime_ms"]],
        "ref ms": [_fmt(v, ".4g") for v in board["ref_ms"]],
        "% of floor": [_fmt(v, ".0f", "%") for v in board["pct_of_floor"]],
        "evaluations": board["evaluations"],
        "correct": board["correct_trials"],
        "evals to first correct": [_fmt(v, ".0f") for v in board["evals_to_first_correct"]],
        "best by": board["best_operator"].fillna("–"),
        "tokens": board["tokens"],
    })
    not_started = {t: why for t, why in task_reasons(run, "not_started").items() if t not in set(board["task"])}
    if not_started:  # no study of its own: a row of its own, so the table holds every task of the campaign
        shown = pd.concat([shown.astype(object), pd.DataFrame({"task": list(not_started), "evaluations": 0,
                                                               "correct": 0, "best by": "not started"})],
                          ignore_index=True)
    body.append(_table(shown))
    body.append('<p class="meta">Speedup = PyTorch reference time / kernel time on the same device; '
                "a task with no correct kernel has no speedup (–), never a number.</p>")
    for task, why in not_started.items():
        body.append(f'<p class="note"><b>{html.escape(task)}</b> did not start: {html.escape(why)}</p>')
    for task, why in task_reasons(run, "stopped_early").items():
        body.append(f'<p class="note"><b>{html.escape(task)}</b> stopped early: {html.escape(why)}</p>')

    body.append("<h2>Convergence</h2>")
    body.append(_figure(plot_convergence(run, out), "best speedup so far vs evaluations and vs wall time"))

    body.append("<h2>Outcomes</h2>")
    long = pd.concat([df.assign(task=t)[["task", "status"]] for t, df in run.trials.items() if not df.empty]
                     or [pd.DataFrame(columns=["task", "status"])], ignore_index=True)
    counts = pd.crosstab(long["task"], long["status"]) if not long.empty else pd.DataFrame()
    if not counts.empty:
        order = [s for s in STATUS_COLOURS if s in counts.columns] + [s for s in counts.columns
                                                                        if s not in STATUS_COLOURS]
        counts = counts[order].reindex(list(run.trials)).fillna(0).astype(int)
        counts.columns.name = None
        body.append(_table(counts.reset_index()))
        drawn = counts.loc[counts.sum(axis=1).sort_values(ascending=False, kind="stable").index[:STATUS_ROWS]]
        if len(drawn) < len(counts):  # a bar per task of a thousand-task campaign is an unreadable figure
            body.append(f'<p class="meta">The figure draws the {len(drawn)} tasks with the most evaluations of '
                        f"{len(counts)}; the table above lists every task.</p>")
        body.append(_figure(plot_statuses(drawn, out), "evaluations per status per task"))
    else:
        body.append("<p>No evaluation recorded yet.</p>")

    for _, row in board.iterrows():
        task = row["task"]
        body.append(f'<h2 id="{html.escape(task)}">{html.escape(task)}</h2>')
        if pd.isna(row["best_candidate_id"]):
            body.append("<p>No correct kernel yet: keep the PyTorch reference.</p>")
            continue
        body.append(f"<p>Best: <b>{_fmt(row['best_speedup'], '.4g', 'x')}</b> "
                    f"({_fmt(row['best_runtime_ms'], '.4g')} ms vs reference {_fmt(row['ref_ms'], '.4g')} ms), "
                    f"made by <b>{html.escape(str(row['best_operator']))}</b>, candidate "
                    f"<code>{html.escape(str(row['best_candidate_id']))}</code>."
                    + (" Timed on the Triton interpreter: not representative of a GPU."
                       if row["timing_representative"] is False else "") + "</p>")
        body.append("<h3>Lineage (seed first)</h3>")
        body.append(_lineage_html(lineage(run, task, row["best_candidate_id"])))
        source = best_source(run, row["best_candidate_id"])
        body.append("<details open><summary>Source of the best kernel (parameters baked in)</summary>"
                    f"<pre><code>{html.escape(source or '(candidate file missing)')}</code></pre></details>")
    page = out / "index.html"
    page.write_text(_page(f"evoforge report: {run.campaign or run.run_dir.name}", body))
    return page


# ---------------------------------------------------------------------------------------------- ablations
def is_ablation_dir(path: str | Path) -> bool:
    return (Path(path) / "summary.csv").is_file()


def plot_ablation_speedup(agg: pd.DataFrame, out_dir: Path, confidence: float) -> str:
    """Each variant's geometric-mean speedup and its interval, on a log scale: a ratio's interval is symmetric
    there, and one variant's wide interval does not flatten every other variant into the axis."""
    fig = Figure(figsize=(max(5.0, 1.3 * len(agg) + 2), 4), layout="constrained")
    ax = fig.subplots()
    mid = agg["geomean_speedup"].to_numpy(dtype=float)
    lo = (mid - agg["geomean_speedup_lo"].fillna(agg["geomean_speedup"]).to_numpy(dtype=float))
    hi = (agg["geomean_speedup_hi"].fillna(agg["geomean_speedup"]).to_numpy(dtype=float) - mid)
    err = [[0 if math.isnan(v) else v for v in lo], [0 if math.isnan(v) else v for v in hi]]
    x = list(range(len(agg)))
    ax.errorbar(x, mid, yerr=err, fmt="o", markersize=8, capsize=6, color="#4c72b0", lw=1.6)
    ax.set_xticks(x, [str(v) for v in agg["variant"]])
    ax.set_xlim(-0.6, len(agg) - 0.4)
    ax.set_yscale("log")
    values = [v for v in [*mid, *(mid - lo), *(mid + hi)] if v > 0 and math.isfinite(v)]
    if values and min(values) / 1.5 <= 1.0 <= max(values) * 1.5:
        ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_ylabel("geometric-mean speedup (x, log scale)")
    ax.set_title(f"speedup per variant ({confidence:.0%} CI across seeds; correct kernels only)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir, "speedup_per_variant")


def plot_fast_p(curves: pd.DataFrame, out_dir: Path) -> str:
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.subplots()
    # Thresholds are ratios: on a log axis when the speedups span a decade or sit far below 1x (the interpreter).
    moving = curves[curves["fast_p"] > 0]["p"] if not curves.empty else curves["p"]
    positive = [float(p) for p in moving if p > 0]
    logx = bool(positive) and (max(positive) / min(positive) > 10 or max(positive) < 0.5)
    if logx:
        curves = curves[curves["p"] > 0]
    for variant, df in curves.groupby("variant", sort=False):
        ax.step(df["p"], df["fast_p"], where="post", label=str(variant), lw=1.8)
        if df["lo"].notna().any():
            ax.fill_between(df["p"], df["lo"], df["hi"], step="post", alpha=0.15)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("speedup threshold p" + (" (log scale)" if logx else ""))
    ax.set_ylabel("fast_p (fraction of tasks correct and faster than p)")
    ax.set_ylim(-0.02, 1.02)
    ax.axvline(1.0, color="grey", ls="--", lw=0.8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title("fast_p curves (mean across seeds)")
    return _save(fig, out_dir, "fast_p")


def write_ablation_report(ablation_dir: str | Path) -> Path:
    """Write ``DIR/report/index.html`` comparing the variants of an ablation from its ``summary.csv``."""
    root = Path(ablation_dir)
    summary = ab.read_summary(root / "summary.csv")
    confidence = ab.read_confidence(root)
    agg = ab.aggregate(summary, confidence=confidence)
    out = root / "report"
    out.mkdir(parents=True, exist_ok=True)
    body = [f"<p>{summary['variant'].nunique()} variants × {summary['task'].nunique()} tasks × "
            f"{summary['seed'].nunique()} seeds = {len(summary)} (variant, task, seed) results.</p>"]
    if (summary["timing_representative"] == False).any():  # noqa: E712
        body.append(f'<p class="note"><b>Note:</b> {html.escape(INTERPRETER_NOTE)}</p>')
    body.append("<h2>Comparison</h2>")
    body.append(_table(ab.format_aggregate(agg)))
    body.append(f'<p class="meta">{html.escape(ab.AGGREGATE_NOTE.format(confidence=confidence))}</p>')
    if agg["geomean_speedup"].notna().any():
        body.append(_figure(plot_ablation_speedup(agg, out, confidence), "geometric-mean speedup per variant"))
    body.append(_figure(plot_fast_p(ab.fast_p_curves(summary, confidence=confidence), out), "fast_p curves"))
    body.append("<h2>Per task (mean over seeds)</h2>")
    per_task = summary.assign(speedup=summary["best_speedup"].where(summary["correct"])).groupby(
        ["task", "variant"], sort=False).agg(correct=("correct", "mean"), speedup=("speedup", "mean")).unstack()
    per_task.columns = [f"{v}: {m}" for m, v in per_task.columns]
    body.append(_table(per_task.map(lambda v: _fmt(v, ".3g")).reset_index()))
    body.append("<h2>Runs</h2>")
    runs = summary.copy()
    runs["run"] = [f"{v}-s{s}" for v, s in zip(runs["variant"], runs["seed"], strict=True)]
    rows = []
    for run_name, df in runs.groupby("run", sort=False):
        link = root / "runs" / run_name / "report" / "index.html"
        label = (f'<a href="../runs/{html.escape(run_name)}/report/index.html">{html.escape(run_name)}</a>'
                 if link.is_file() else html.escape(run_name))
        rows.append(f"<tr><td>{label}</td><td>{int(df['correct'].sum())}/{len(df)}</td>"
                    f"<td>{_fmt(df['wall_s'].max(), '.1f')}</td><td>{int(df['evaluations'].sum())}</td></tr>")
    body.append("<table><tr><th>run</th><th>correct tasks</th><th>wall s</th><th>evaluations</th></tr>"
                + "".join(rows) + "</table>")
    body.append('<p class="meta">Raw rows: summary.csv; per-variant table: aggregate.csv '
                "(both beside report/). Each run's record opens with <code>evoforge dashboard "
                "DIR/runs/RUN</code>.</p>")
    page = out / "index.html"
    page.write_text(_page(f"evoforge ablation: {root.resolve().name}", body))
    return page


def write_report(path: str | Path) -> Path:
    """A run directory or an ablation directory (one with ``summary.csv``) -> its report page."""
    p = Path(path)
    if not p.is_dir():
        raise UsageError(f"RUN_DIR {p}: no such directory")
    if is_ablation_dir(p):
        return write_ablation_report(p)
    return write_run_report(p)
