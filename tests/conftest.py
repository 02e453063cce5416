"""Shared fixtures: a real sandboxed evaluator on the Triton interpreter, real KernelBench tasks."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: ``[[tasks]]`` entries of a campaign config: KernelBench's ReLU and LeakyReLU at a small size, each from a plain
#: fixture kernel (launch constants lifted into a SPACE; the LeakyReLU's computed, so nothing to tune).
PLAIN_RELU_TASK = f"""
[[tasks]]
spec = "L1/19"
seed_kernel = "{FIXTURES / 'relu' / 'plain_constants.py'}"
set = {{batch_size = 4, dim = 1000}}
"""
PLAIN_LEAKY_TASK = f"""
[[tasks]]
spec = "L1/20"
seed_kernel = "{FIXTURES / 'leaky' / 'plain_computed.py'}"
set = {{batch_size = 4, dim = 1000}}
"""

# Inductor compiles a graph's kernels in a pool of worker processes (each importing torch) as wide as the machine;
# on the CPU its Triton kernels are the interpreter's and compile in no time, so on CI's two cores, beside the other
# xdist worker, the pool's start-up was most of a capture's time (a capture of L1/76 took 24 s, 13 s without the
# pool). Set before torch is imported here; every process the tests start inherits it (a capture keeps a value
# the user set: inductor_capture.capture_env). No test is about the pool's width: the one that reads it sets its own.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    # `make test` runs `pytest -n 2 --dist loadfile`, and xdist then starts the files in order of their number of
    # tests, most first (its --loadscope-reorder, on by default): the files of one or two long campaigns came last,
    # and one worker ran the last two of them while the other had nothing left. The order below is kept instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that hold a ``slow`` test (a campaign, a script end to end: tens of seconds each on two cores)
    first, the rest after them in their own order: with a file to a worker, the many short files at the end keep
    both workers busy until the run ends together."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file's tests keep their order


def kernelbench_dir() -> Path:
    from evoforge.task import default_kernelbench_dir

    return default_kernelbench_dir()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The suite runs real KernelBench tasks: without KernelBench it stops at once with one line saying how to give
    it, not with a failure in every test that names a task (a clone in a folder of its own has no
    ../shared/kernelbench beside it)."""
    from evoforge.task import is_kernelbench, locate_kernelbench, ways_to_kernelbench

    found = locate_kernelbench()
    if found.path is None or not is_kernelbench(found.path):
        where = f"{found.path} (from {found.how}) is not a KernelBench folder" if found.path else "none found"
        pytest.exit(f"the tests need KernelBench's problems: {where}; {ways_to_kernelbench()}", returncode=2)


@pytest.fixture(scope="session")
def relu_task():
    from evoforge.task import Task, parse_shapes

    return Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000}, shapes=parse_shapes("batch_size=3,dim=777"))


@pytest.fixture(scope="session")
def interpreter_evaluator():
    """One sandboxed evaluation process reused across tests, as a campaign reuses it. Built from the backend's
    name alone: the interpreter brings its own environment (TRITON_INTERPRET=1) and memory limit."""
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    # 60 s: an honest kernel on the interpreter finishes well within it even on a loaded 2-core machine (it took
    # over 10 s there); the hang test gives its own, shorter limit.
    evaluator = Evaluator(backend="interpreter", options=ChainOptions(trials=3, timing=False, seed=42),
                          timeout_s=60, knowledge=False)
    yield evaluator
    evaluator.close()


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evoforge.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd or REPO)


def cli_main(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``evoforge ARGS`` in this process (what ``python -m evoforge.cli`` runs: ``sys.exit(main(argv))``), for
    commands whose outcome is their exit code and output: a second of interpreter and imports less than
    ``run_cli``, whose own process a test needs only for what a process has (its environment, its children, a
    kill). An exception that escapes ``main`` fails the test, as its traceback would fail ``run_cli``'s checks."""
    from evoforge.cli import main

    capsys.readouterr()  # what the test printed before is not the command's
    here = os.getcwd()
    os.chdir(REPO)  # where run_cli runs its command: relative paths mean the same
    try:
        code = main(list(args))
    finally:
        os.chdir(here)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["evoforge", *args], code, out, err)


def cli_main_captured(*args: str) -> subprocess.CompletedProcess[str]:
    """``cli_main`` for a module-scoped fixture, which has no ``capsys``: the command's output is caught by standing
    in for ``sys.stdout`` and ``sys.stderr`` while it runs. A campaign run so shares the test process's Ray with
    the module's other campaigns instead of starting one of its own (tens of seconds on two cores)."""
    import contextlib
    import io

    from evoforge.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["evoforge", *args], code, out.getvalue(), err.getvalue())


# ---------------------------------------------------------------- PostgreSQL


def _postgres_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent  # /usr/local/bin may hold links to a few of them
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server of its own in a temporary directory, on a free port of 127.0.0.1 (one per session:
    the storage tests and the store conformance suite share it)."""
    pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed (pip install psycopg2-binary)")
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql; `make sysdeps` does it)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="evoforge-pg-"))
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
        try:
            import pwd

            pg = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the server as")
        os.chown(root, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", free_port()

    def run(*cmd: str) -> None:
        proc = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{cmd[0]} failed: {proc.stderr[-1500:]}"

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "evoforge", "--no-sync", "-E", "UTF8")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "start",
        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off")
    try:
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "evoforge", "evoforge")
        yield f"postgresql+psycopg2://evoforge:not-a-secret@127.0.0.1:{port}/evoforge"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def cute_toolchain_missing() -> str | None:
    """Why CuTe candidates cannot be built here (no nvcc, no CUTLASS headers), or None."""
    from evoforge.backends import cute

    try:
        cute.nvcc_path()
        cute.cutlass_include_dir()
    except cute.CuteToolchainError as e:
        return str(e)
    return None


needs_nvcc = pytest.mark.skipif(cute_toolchain_missing() is not None,
                                reason=f"no CuTe toolchain: {cute_toolchain_missing()}")
