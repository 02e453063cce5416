"""The campaign driver at cluster scale (issue AA): how its cost per evaluation grows with the record, and where
it saturates.

Each run is one real campaign (``evoforge.campaign.Campaign``: Ray actors, the default strategy, the parameter and
rule operators, the knowledge base, the result cache, the Optuna record) on ``--backend replay``: every evaluation is
answered by a simulated device from a recorded H200 landscape (the files of /work/shared/landscapes and
experiments/results/search/landscapes, each task a link named ``<file>-<i>.json`` to one of them), so the GPUs cost
nothing and the driver is what is measured. N simulated devices are N evaluation slots, served by
ceil(N / devices-per-actor) Ray actor processes (128 actor processes of Python and Ray do not fit in this machine's
memory beside the others' work; an actor's slots are a threaded actor's concurrent calls).

Per evaluation: driver CPU time (the driver process's CPU time over the evaluations recorded), proposal latency
(the strategy's ``ask`` and the operator's ``materialize``), the child's way to the pool (``Campaign._ready``: the
legality check, the precheck, the cache, the candidate file), the result's way back (``Campaign._absorb``: the
strategy told, the trial written) and the record's write alone (``OptunaStore.record``); each in ten windows of the
run, so growth with the record shows. End to end: evaluations per second, the driver's peak memory, the record's
size. ``--profile`` keeps a cProfile of the driver of the largest run. ``--nodes K`` runs them on a local multi-node Ray
(a head and K-1 worker nodes on this machine, Ray's ``cluster_utils``), the campaign joining it by address as it joins a
cluster, the actors spread over the nodes.

    .venv/bin/python experiments/benchmarks/scale_bench.py --evals 1000 10000 --devices 1 8 32 128 \\
        --storage sqlite postgresql --out experiments/results/scale/
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as _dt
import gc
import io
import json
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LANDSCAPES = [*sorted(Path("/work/shared/landscapes").glob("*.json")),
              *sorted((REPO / "experiments/results/search/landscapes").glob("*.json"))]
WINDOWS = 10


def landscape_files() -> list[Path]:
    """The recorded landscapes this checkout can read (the shared ones where present, else the tests' copies)."""
    from evoforge.backends.replay import Landscape

    found = []
    for path in LANDSCAPES:
        try:
            if not path.name.startswith("derived_") and Landscape.load(path).ok_rows():
                found.append(path)
        except Exception:  # noqa: BLE001  (a file beside them that is not a landscape)
            continue
    return found or sorted((REPO / "tests/search/landscapes").glob("*.json"))


def task_links(folder: Path, tasks: int) -> list[Path]:
    """``tasks`` links, each a task of its own name, to the landscapes in turn."""
    files = landscape_files()
    folder.mkdir(parents=True, exist_ok=True)
    links = []
    for i in range(tasks):
        source = files[i % len(files)]
        link = folder / f"{source.stem}-{i:04d}.json"
        if not link.exists():
            link.symlink_to(source)
        links.append(link)
    return links


# ---------------------------------------------------------------- PostgreSQL


def start_postgres(root: Path) -> tuple[str | None, Any]:
    """A throwaway PostgreSQL server (as tests/conftest.py starts one), or (None, why) where it cannot start."""
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return None, "psycopg2 is not installed (pip install psycopg2-binary)"
    found = shutil.which("pg_ctl")
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found and not bins:
        return None, "no PostgreSQL server binaries (apt-get install postgresql)"
    bin_dir = Path(found).resolve().parent if found else bins[-1].parent
    as_user: list[str] = []
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        import pwd

        try:
            pg = pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no postgres user to run the server as"
        os.chown(root, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "evoforge", "--no-sync", "-E", "UTF8")
    # fsync on: a cluster's record server keeps its commits (the tests' server turns it off for speed)
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "start",
        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1")
    run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "evoforge", "evoforge")

    def stop() -> None:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)

    return f"postgresql+psycopg2://evoforge@127.0.0.1:{port}/evoforge", stop


def pg_version(url: str) -> str:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.connect() as c:
        return str(c.execute(sqlalchemy.text("show server_version")).scalar())


def record_bytes(url: str, run_dir: Path) -> int:
    if url.startswith("postgresql"):
        import sqlalchemy

        engine = sqlalchemy.create_engine(url)
        with engine.connect() as c:
            return int(c.execute(sqlalchemy.text("select pg_database_size(current_database())")).scalar())
    return (run_dir / "optuna.db").stat().st_size


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process, MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


# ---------------------------------------------------------------- the measured campaign


class Meter:
    """Seconds spent in each part of the driver, per window of the run (a tenth of its evaluations each)."""

    PARTS = ("ask", "make", "ready", "absorb", "record")

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.windows = [{**{p: 0.0 for p in self.PARTS}, **{f"{p}_n": 0 for p in self.PARTS}} for _ in range(WINDOWS)]
        # (evaluations, wall s, driver CPU s, its main thread's CPU s, garbage collection s) at each window's end: the
        # driver's CPU beyond its parts is either its other threads' (Ray's) or the collector's
        self.marks: list[tuple[int, float, float, float, float]] = []
        self.started = (time.perf_counter(), time.process_time(), time.thread_time())
        self.gc_s = 0.0
        self._gc_t0 = 0.0
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_t0

    def close(self) -> None:
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def window(self) -> dict[str, float]:
        return self.windows[min(WINDOWS - 1, self.done * WINDOWS // max(1, self.total))]

    def add(self, part: str, seconds: float) -> None:
        w = self.window()
        w[part] += seconds
        w[f"{part}_n"] += 1

    def recorded(self) -> None:
        self.done += 1
        if self.done * WINDOWS // max(1, self.total) > len(self.marks) or self.done == self.total:
            self.marks.append((self.done, time.perf_counter() - self.started[0],
                               time.process_time() - self.started[1], time.thread_time() - self.started[2], self.gc_s))


def measured_campaign(config: Any, meter: Meter) -> Any:
    """A ``Campaign`` whose driver parts are timed into ``meter`` (the engine itself is unchanged)."""
    from evoforge.campaign import Campaign
    from evoforge.children import ChildMaker

    class TimedMaker(ChildMaker):
        async def materialize(self, state: Any, proposal: Any) -> Any:
            t0 = time.perf_counter()
            made = await super().materialize(state, proposal)
            meter.add("make", time.perf_counter() - t0)
            return made

    class MeasuredCampaign(Campaign):
        @property
        def maker(self) -> ChildMaker:
            return TimedMaker(self.mutators, self.config)

        def prepare(self) -> None:
            super().prepare()
            record = self.store.record

            def timed_record(*args: Any, **kwargs: Any) -> int:
                t0 = time.perf_counter()
                number = record(*args, **kwargs)
                meter.add("record", time.perf_counter() - t0)
                meter.recorded()
                return number

            self.store.record = timed_record  # type: ignore[method-assign]
            for state in self.tasks.values():
                ask = state.strategy.ask

                def timed_ask(n: int, _ask: Any = ask) -> Any:
                    t0 = time.perf_counter()
                    out = _ask(n)
                    meter.add("ask", time.perf_counter() - t0)
                    return out

                state.strategy.ask = timed_ask  # type: ignore[method-assign]

        def _ready(self, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = super()._ready(*args, **kwargs)
            meter.add("ready", time.perf_counter() - t0)
            return out

        def _absorb(self, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = super()._absorb(*args, **kwargs)
            if kwargs.get("record", True):
                meter.add("absorb", time.perf_counter() - t0)
            return out

    return MeasuredCampaign(config, progress=False)


def run_one(*, evals: int, devices: int, per_task: int, storage: str, url: str | None, work: Path,
            per_actor: int, delay_s: float, profile: Path | None, seed: int) -> dict[str, Any]:
    from evoforge.config import config_from_dict

    tasks = max(1, evals // per_task)
    name = f"scale-{evals}-{devices}-{storage}"
    run_dir = work / name
    links = task_links(work / "tasks", tasks)
    config = config_from_dict({
        "campaign": {"name": name, "out": str(run_dir), "backend": "replay", "budget_evals": per_task,
                     "workers": devices, "seed": seed, "compile_baseline": "off", "storage": url or ""},
        "tasks": [{"landscape": str(link)} for link in links],
        "replay": {"delay_s": delay_s, "devices_per_actor": per_actor}}, source="scale_bench")
    meter = Meter(tasks * per_task)
    campaign = measured_campaign(config, meter)
    t0, c0 = time.perf_counter(), time.process_time()
    profiler = cProfile.Profile() if profile else None
    try:
        campaign.prepare()
        setup_s, setup_cpu = time.perf_counter() - t0, time.process_time() - c0
        campaign.start_pool()
        meter.started = (time.perf_counter(), time.process_time(), time.thread_time())
        meter.gc_s = 0.0
        if profiler:
            profiler.enable()
        summary = asyncio.run(campaign.run())
        if profiler:
            profiler.disable()
    finally:
        campaign.close()
        meter.close()
    wall_s, cpu_s = time.perf_counter() - meter.started[0], time.process_time() - meter.started[1]
    done = sum(t["evaluations"] for t in summary["tasks"].values())
    rss, peak = rss_mib()
    windows = []
    previous = (0, 0.0, 0.0, 0.0, 0.0)
    for w, mark in zip(meter.windows, meter.marks, strict=False):
        n = mark[0] - previous[0]
        windows.append({"evaluations": mark[0], "evals_per_s": round(n / max(mark[1] - previous[1], 1e-9), 1),
                        "driver_cpu_ms_per_eval": round(1e3 * (mark[2] - previous[2]) / max(n, 1), 3),
                        "main_thread_cpu_ms": round(1e3 * (mark[3] - previous[3]) / max(n, 1), 3),
                        "gc_ms": round(1e3 * (mark[4] - previous[4]) / max(n, 1), 3),
                        **{f"{p}_ms": round(1e3 * w[p] / max(w[f"{p}_n"], 1), 3) for p in Meter.PARTS}})
        previous = mark
    out = {"evals": done, "devices": devices, "actors": -(-devices // per_actor), "tasks": tasks,
           "per_task": per_task, "storage": storage, "delay_s": delay_s,
           "setup_s": round(setup_s, 2), "setup_cpu_s": round(setup_cpu, 2),
           "run_s": round(wall_s, 2), "evals_per_s": round(done / wall_s, 1),
           "driver_cpu_ms_per_eval": round(1e3 * cpu_s / max(done, 1), 3),
           "driver_rss_mib": round(rss, 1), "driver_peak_rss_mib": round(peak, 1),
           "record_bytes": record_bytes(url or "", run_dir), "run_dir_bytes": folder_bytes(run_dir),
           "statuses": _statuses(summary), "windows": windows, "run_dir": str(run_dir)}
    if profiler and profile:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
        profile.write_text(text.getvalue())
        profiler.dump_stats(str(profile.with_suffix(".prof")))  # the raw profile beside it (callers, callees)
        out["profile"] = str(profile)
    return out


def _statuses(summary: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for t in summary["tasks"].values():
        for k, v in t["statuses"].items():
            total[k] = total.get(k, 0) + v
    return total


def time_resume_and_report(run_dir: Path) -> dict[str, Any]:
    """``evoforge run --resume`` up to its first proposal (the record read back, every strategy rebuilt) and
    ``evoforge report``, each as a user runs it (a process of its own)."""
    py = sys.executable
    t0 = time.perf_counter()
    code = ("import time,sys;from evoforge.config import resolved_config_from_file;from evoforge.campaign import "
            "Campaign;c=resolved_config_from_file(__import__('pathlib').Path(sys.argv[1])/'config.json');"
            "c.out=sys.argv[1];k=Campaign(c,resume=True,progress=False);t=time.perf_counter();k.prepare();"
            "n=k.restore();print(n, time.perf_counter()-t)")
    proc = subprocess.run([py, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=3600)
    resume_s = time.perf_counter() - t0
    restored = proc.stdout.split()
    t0 = time.perf_counter()
    rep = subprocess.run([py, "-m", "evoforge.cli", "report", str(run_dir)], capture_output=True, text=True,
                         timeout=3600)
    report_s = time.perf_counter() - t0
    return {"resume_s": round(resume_s, 1), "resume_restored": int(restored[0]) if restored else None,
            "resume_ok": proc.returncode == 0, "resume_error": proc.stderr[-500:] if proc.returncode else "",
            "report_s": round(report_s, 1), "report_ok": rep.returncode == 0,
            "report_error": rep.stderr[-500:] if rep.returncode else ""}


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version()}
    for pkg in ("evoforge", "optuna", "ray", "torch", "triton", "sqlalchemy"):
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evals", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--devices", type=int, nargs="+", default=[1, 8, 32, 128])
    p.add_argument("--storage", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    p.add_argument("--per-task", type=int, default=100, help="evaluations per task (tasks = evals / per-task)")
    p.add_argument("--devices-per-actor", type=int, default=16)
    p.add_argument("--delay", type=float, default=0.0, help="seconds each simulated evaluation takes (default 0: "
                   "the driver's own limit)")
    p.add_argument("--only", nargs="*", default=[], metavar="EVALS:DEVICES:STORAGE",
                   help="run only these combinations (default: every one of --evals x --devices x --storage)")
    p.add_argument("--profile", action="store_true", help="a cProfile of the driver of the largest run")
    p.add_argument("--resume-report", action="store_true", help="time --resume and report on the largest record")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nodes", type=int, default=1,
                   help="a local multi-node Ray of this many nodes (Ray's own cluster_utils: a head and NODES-1 worker "
                        "nodes on this machine, the actors spread over them by their CPUs), joined as a cluster is "
                        "(ray_address); default 1: Ray embedded, as a campaign starts it")
    p.add_argument("--work", default="", help="folder for run directories (default: a temporary one)")
    p.add_argument("--out", default=str(REPO / "experiments/results/scale"))
    p.add_argument("--tag", default="scale", help="results file name (OUT/TAG.json)")
    args = p.parse_args(argv)

    import logging

    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("evoforge").setLevel(logging.ERROR)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    import ray
    from evoforge.search.pool import init_ray

    work = Path(args.work or tempfile.mkdtemp(prefix="evoforge-scale-"))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    actors = -(-max(args.devices) // args.devices_per_actor)
    cluster = None
    if args.nodes > 1:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # the nodes' daemons start without token auth, as a local start does
        from ray.cluster_utils import Cluster

        per_node = max(1, -(-actors // args.nodes))  # no node holds every actor: each takes its share of them
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": per_node, "include_dashboard": False})
        for _ in range(args.nodes - 1):
            cluster.add_node(num_cpus=per_node)
        cluster.wait_for_nodes()
        init_ray(cluster.address)
    else:
        init_ray("", num_cpus=max(2, actors))
    url, stop = (None, None)
    combos = [(e, d, s) for s in args.storage for e in args.evals for d in args.devices]
    if args.only:
        wanted = {tuple(x.split(":")) for x in args.only}
        combos = [c for c in combos if (str(c[0]), str(c[1]), c[2]) in wanted]
    skipped: dict[str, str] = {}
    if "postgresql" in args.storage:
        url, stop = start_postgres(work / "pg")
        if url is None:
            skipped["postgresql"] = str(stop)
            print(f"postgresql skipped: {stop}", flush=True)
            combos = [c for c in combos if c[2] != "postgresql"]
    largest = max(combos, key=lambda c: (c[0], c[1])) if combos else None
    results: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "date": _dt.datetime.now().isoformat(" ", "minutes"),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "versions": versions(), "landscapes": [p.name for p in landscape_files()],
        "devices_per_actor": args.devices_per_actor, "skipped": skipped, "runs": [],
        "ray_nodes": [{"cpus": n["Resources"].get("CPU"), "head": bool(n["Resources"].get("node:__internal_head__"))}
                      for n in ray.nodes() if n["Alive"]]}
    if url:
        results["versions"]["postgresql"] = pg_version(url)
    try:
        for evals, devices, storage in combos:
            print(f"run: {evals} evaluations, {devices} simulated devices, {storage}", flush=True)
            profile = out_dir / f"{args.tag}_profile_{evals}_{devices}_{storage}.txt" \
                if args.profile and (evals, devices, storage) == largest else None
            res = run_one(evals=evals, devices=devices, per_task=args.per_task, storage=storage,
                          url=url if storage == "postgresql" else None, work=work,
                          per_actor=min(args.devices_per_actor, devices), delay_s=args.delay, profile=profile,
                          seed=args.seed)
            if args.resume_report and (evals, devices, storage) == largest:
                res.update(time_resume_and_report(Path(res["run_dir"])))
            results["runs"].append(res)
            print(json.dumps({k: v for k, v in res.items() if k != "windows"}), flush=True)
            (out_dir / f"{args.tag}.json").write_text(json.dumps(results, indent=1))
    finally:
        if stop and url:
            stop()
        if cluster is not None:
            ray.shutdown()
            cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
