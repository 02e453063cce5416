"""A larger record from a measured one, for timing ``--resume`` and ``evoforge report`` past what this machine can
run in an afternoon (issue AA: 100k trials; scale_bench.py runs ~20 evaluations/s here, 100k would take 90 minutes).

Each task of RUN_DIR is copied ``--times`` times under new task names (a link to the same landscape as the task it
copies, so every trial's candidate belongs to its task), every row of its study copied in SQL (trials, values,
parameters, user and system attributes, the study's own rows); the candidates, artifacts and cache are shared. The
result is a record of ``times`` x the trials over ``times`` x the tasks, each task's history a real campaign's: what
a resume rebuilds per trial is what it rebuilds in the measured run, and the report's per-trial reading is the same
per row. What it is not: a record of fewer tasks with longer histories (1,000 trials a task).

    .venv/bin/python experiments/benchmarks/grow_record.py RUN_DIR OUT_DIR --times 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from pathlib import Path

TRIAL_TABLES = {"trial_values": "objective, value, value_type",
                "trial_params": "param_name, param_value, distribution_json",
                "trial_user_attributes": "key, value_json",
                "trial_system_attributes": "key, value_json"}
STUDY_TABLES = {"study_directions": "direction, objective", "study_user_attributes": "key, value_json",
                "study_system_attributes": "key, value_json"}


def grow(run_dir: Path, out: Path, times: int) -> int:
    """Write the grown run directory; returns its number of trials."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in ("candidates", "artifacts", "cache"):
        if (run_dir / name).exists():
            (out / name).symlink_to((run_dir / name).resolve())
    shutil.copy(run_dir / "optuna.db", out / "optuna.db")
    config = json.loads((run_dir / "config.json").read_text())
    campaign = config["name"]
    db = sqlite3.connect(out / "optuna.db")
    studies = dict(db.execute("select study_name, study_id from studies"))
    tasks = list(config["tasks"])
    grown = []
    for copy in range(1, times):
        for entry in tasks:
            link = Path(entry["landscape"])
            new_link = link.with_name(f"{link.stem}-x{copy}.json")
            if not new_link.exists():
                new_link.symlink_to(link.resolve())
            grown.append({**entry, "landscape": str(new_link), "spec": str(new_link)})
            source = studies[f"{campaign}/{link.stem}"]
            study = db.execute("insert into studies (study_name) values (?)",
                               (f"{campaign}/{new_link.stem}",)).lastrowid
            for table, cols in STUDY_TABLES.items():
                db.execute(f"insert into {table} (study_id, {cols}) select ?, {cols} from {table} "  # noqa: S608
                           "where study_id = ?", (study, source))
            for trial_id, number, state, start, end in db.execute(
                    "select trial_id, number, state, datetime_start, datetime_complete from trials "
                    "where study_id = ? order by number", (source,)).fetchall():
                new = db.execute("insert into trials (number, study_id, state, datetime_start, datetime_complete) "
                                 "values (?, ?, ?, ?, ?)", (number, study, state, start, end)).lastrowid
                for table, cols in TRIAL_TABLES.items():
                    db.execute(f"insert into {table} (trial_id, {cols}) select ?, {cols} from {table} "  # noqa: S608
                               "where trial_id = ?", (new, trial_id))
        db.commit()
    config["tasks"] = tasks + grown
    config["out"] = str(out)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    n = db.execute("select count(*) from trials").fetchone()[0]
    db.close()
    return int(n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--times", type=int, default=10)
    p.add_argument("--time", action="store_true", help="then time --resume and report on it (scale_bench's)")
    args = p.parse_args(argv)
    n = grow(args.run_dir, args.out, args.times)
    print(json.dumps({"trials": n, "run_dir": str(args.out)}), flush=True)
    if args.time:
        sys.path.insert(0, str(Path(__file__).parent))
        from scale_bench import time_resume_and_report

        print(json.dumps({"trials": n, **time_resume_and_report(args.out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
