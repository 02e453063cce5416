"""Contained candidates (bubblewrap): every route out that the issue names is closed, and the campaign goes on.

The probe kernel (tests/fixtures/containment/probe.py) is allowed what the judge's Python guards would refuse
(reading /proc, sockets), so what stops it here is the containment itself: a PID namespace without the processes
that hold the API key, no network, a read-only file system with a private /tmp, the run directory out of sight.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES, REPO
from tests.reliability.conftest import good

CONTAINED = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not CONTAINED, reason="bubblewrap (bwrap) is not installed")

SECRET = "sk-evoforge-containment-test-0042"
ADVERSARIAL = FIXTURES / "containment"


def adversary(name: str, **params: object) -> Candidate:
    return Candidate.from_source((ADVERSARIAL / f"{name}.py").read_text(), params=params)


@pytest.fixture(scope="module")
def task():
    from evoforge.task import Task

    return Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000},
                     allow=["introspection", "network", "processes"])


@pytest.fixture(scope="module")
def probe_report(bounded_evaluator, task, tmp_path_factory):
    evaluator, run_dir = bounded_evaluator
    (run_dir / "optuna.db").write_text("the record")
    (run_dir / "cache").mkdir(exist_ok=True)
    (run_dir / "cache" / "entry.json").write_text("another candidate's result")
    sibling = tmp_path_factory.mktemp("other-evaluator") / "candidate.py"
    sibling.write_text("another candidate's source")
    # Another judge's candidate, where a second evaluator on this machine keeps it.
    other_judge = Path(tempfile.mkdtemp(prefix="evoforge-sandbox-")) / "evoforge-eval-x" / "backend-0" / "candidate-y"
    other_judge.mkdir(parents=True)
    (other_judge / "candidate.py").write_text("another judge's candidate")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    patch = pytest.MonkeyPatch()
    patch.setenv("OPENAI_API_KEY", SECRET)  # in the caller's environment, as a campaign with an LLM has it
    try:
        assert evaluator.evaluate(task, good()).ok  # a candidate before the probe, in the same judge
        params = {"SECRET": SECRET, "RUN_DIR": str(run_dir), "SIBLING": str(sibling), "PORT": port,
                  "REPO_FILE": str(REPO / "planted-by-candidate.txt"),
                  "OTHERS": [str(run_dir / "optuna.db"), str(run_dir / "cache" / "entry.json"),
                             str(other_judge / "candidate.py")]}
        result = evaluator.evaluate(task, adversary("probe", **params))
        after = evaluator.evaluate(task, good())
        containment = evaluator.containment
    finally:
        patch.undo()
        server.close()
        shutil.rmtree(other_judge.parents[2], ignore_errors=True)
    assert result.status is EvalStatus.RUNTIME_ERROR, result.message
    seen = json.loads(result.message.rsplit("EBORP", 1)[0].rsplit("PROBE", 1)[1])
    return {"seen": seen, "after": after, "containment": containment, "run_dir": run_dir}


@needs_bwrap
def test_the_judge_says_its_candidates_are_contained(probe_report):
    assert probe_report["containment"]["mode"] == "bwrap", probe_report["containment"]


@needs_bwrap
def test_no_process_holding_the_key_is_in_sight(probe_report):
    seen = probe_report["seen"]
    assert seen["secret_in_environ"] == [] and not seen["secret_in_own_env"]
    assert max(seen["pids"]) < 100  # a PID namespace of its own: bwrap, the forkserver, the candidates


@needs_bwrap
def test_the_run_directory_and_other_candidates_are_out_of_sight(probe_report):
    seen = probe_report["seen"]
    assert seen["run_dir_listing"] == {"ok": True, "value": []}  # an empty directory stands in its place
    assert not seen["write_run_dir"]["ok"] and not (probe_report["run_dir"] / "planted.txt").exists()
    assert not seen["read_sibling"]["ok"]
    # the record, the evaluation cache, another judge's candidate: none can be opened
    assert seen["read_others"] == []


def test_an_earlier_candidate_of_the_same_judge_left_nothing_to_read(probe_report):
    assert probe_report["seen"]["previous_candidates"] == []


@needs_bwrap
def test_the_file_system_is_read_only_but_its_own_directory(probe_report):
    seen = probe_report["seen"]
    assert not seen["write_repo"]["ok"] and not (REPO / "planted-by-candidate.txt").exists()
    assert seen["write_own_dir"]["ok"]


def test_the_candidate_holds_no_capability(probe_report):
    """Run by root, a candidate with capabilities could remount the root read-write, unmount what hides a
    folder, or read an undumpable process's memory: it has none, contained or not."""
    seen = probe_report["seen"]
    assert int(seen["capabilities"], 16) == 0
    assert seen["remount_root"] != {"ok": True, "value": True}


@needs_bwrap
def test_no_disk_of_the_host_in_its_dev(probe_report):
    assert probe_report["seen"]["block_devices"] == {"ok": True, "value": []}


@needs_bwrap
def test_no_network(probe_report):
    assert not probe_report["seen"]["connect"]["ok"]


def test_the_campaign_goes_on(probe_report):
    assert probe_report["after"].status is EvalStatus.OK, probe_report["after"].message


def _refused_then_next_ok(evaluator, task, candidate):
    result = evaluator.evaluate(task, candidate)
    after = evaluator.evaluate(task, good())
    assert after.status is EvalStatus.OK, f"after: {after.message[:300]}"
    assert result.speedup is None and result.runtime_ms is None
    return result


def test_a_fork_bomb_is_stopped_and_the_next_candidate_evaluates(bounded_evaluator, task):
    evaluator, _ = bounded_evaluator
    result = _refused_then_next_ok(evaluator, task, adversary("fork_bomb", MODE="linear"))
    assert result.status is EvalStatus.REJECTED, result.message[:500]
    assert "processes and threads at once, over its bound of 12" in result.message


@pytest.mark.parametrize("mode, words", [("spread", "MiB into its directory, over its bound of 48 MiB"),
                                         ("many", "files in its directory, over its bound of 1500")])
def test_filling_its_own_directory_is_stopped(bounded_evaluator, task, mode, words):
    evaluator, _ = bounded_evaluator
    result = _refused_then_next_ok(evaluator, task, adversary("fill", MODE=mode))
    assert result.status is EvalStatus.REJECTED, result.message[:500]
    assert words in result.message
    home = Path(evaluator.sandbox._home.name)
    left = [str(f) for f in home.rglob("*.fill")]
    assert left == [], left[:3]  # its files went with it


def test_one_huge_file_is_cut_at_its_bound(bounded_evaluator, task):
    evaluator, _ = bounded_evaluator
    result = _refused_then_next_ok(evaluator, task, adversary("fill", MODE="big"))
    assert result.status is EvalStatus.RUNTIME_ERROR and "File too large" in result.message, result.message[:500]


@needs_bwrap
def test_filling_the_private_tmp_stops_at_its_size_and_fills_nothing_outside(bounded_evaluator, task):
    """The host's /tmp is judged by what the candidate would leave there (its f<i>.fill files), not by the disk's
    free space, which every other process on a busy machine moves too (a run beside a venv's install saw 62 MB go)."""
    evaluator, _ = bounded_evaluator
    host_tmp = Path(tempfile.gettempdir())
    before = set(host_tmp.glob("f*.fill"))
    result = _refused_then_next_ok(evaluator, task, adversary("fill", WHERE="/tmp", MODE="spread"))
    assert result.status is EvalStatus.RUNTIME_ERROR, result.message[:500]
    assert "No space left on device" in result.message  # its own /tmp is bounded...
    assert set(host_tmp.glob("f*.fill")) - before == set()  # ...and it is not the host's


def test_open_files_are_bounded(bounded_evaluator, task):
    evaluator, _ = bounded_evaluator
    result = _refused_then_next_ok(evaluator, task, adversary("open_files"))
    assert result.status is EvalStatus.RUNTIME_ERROR and "Too many open files" in result.message, result.message


def test_a_python_installed_under_tmp_stays_visible(tmp_path, monkeypatch):
    """A checkout or virtual environment under /tmp (CI's clean clones, a user's scratch venv) must be bound into
    the private /tmp, or bwrap cannot even start the interpreter and candidates run uncontained."""
    from evoforge.judge import containment

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(containment.sys, "prefix", str(venv))
    args = containment.bwrap_arguments(writable=[str(tmp_path / "judge")], hidden=[], network=False)
    binds = {(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"}
    assert str(venv).startswith("/tmp/") and (str(venv), str(venv)) in binds


def test_a_gpu_judge_contains_its_candidates_and_stages_their_arena(tmp_path, monkeypatch):
    """On the H200, bwrap's namespaces broke the CUDA IPC a shared input arena travels by (every contained GPU
    candidate crashed while loading: experiments/results/isolation/containment_gpu_h200.md). A GPU judge now
    contains its candidates all the same, its device nodes bound in, and stages its arena through a file."""
    from evoforge.judge import candidate_process, containment

    if not containment.bwrap_executable():
        pytest.skip("bubblewrap is not installed (make test installs it)")
    monkeypatch.setenv("EVOFORGE_CONTAINMENT", "auto")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("EVOFORGE_ARENA", raising=False)
    decided = containment.contain(directory=tmp_path / "c", writable=[str(tmp_path)], hide=[],
                                  devices=["/dev/zero"])  # a device node that exists here, standing in for a GPU's
    assert decided.mode == "bwrap" and decided.executable
    assert "\n" not in decided.why and "staged" in decided.why and "1 GPU device node" in decided.why
    monkeypatch.setattr(candidate_process, "_CONTEXT", object())  # the decision above is this judge's
    monkeypatch.setattr(candidate_process, "CONTAINMENT", decided)
    from evoforge.judge import vmm

    # Exported as a descriptor where the driver can (judge/vmm.py; never on this machine), else staged.
    assert candidate_process.arena_mode("cuda:0") == ("exported" if vmm.supported("cuda:0") else "staged")
    assert candidate_process.arena_mode("cpu") == "shared"
    monkeypatch.setattr(candidate_process, "CONTAINMENT", containment.Containment("none", "uncontained"))
    assert candidate_process.arena_mode("cuda:0") == "shared"  # uncontained, the device memory is shared as before


def test_a_cute_toolchain_under_tmp_stays_visible(tmp_path, monkeypatch):
    """On the H200 the CUTLASS headers were unpacked under /tmp (EVOFORGE_CUTLASS_INCLUDE=/tmp/include): a contained
    CuTe candidate's ``load`` could not see them behind its private /tmp and failed with "no cute/tensor.hpp
    there", though its library was built and cached (experiments/results/cute/README.md). The folders the
    candidate's toolchain reads are bound in read-only, wherever they lie."""
    from evoforge.judge import containment

    if not containment.bwrap_executable():
        pytest.skip("bubblewrap is not installed (make test installs it)")
    include = tmp_path / "include"
    (include / "cute").mkdir(parents=True)
    (include / "cute" / "tensor.hpp").write_text("// the headers\n")
    cache = tmp_path / "cute-cache"
    cache.mkdir()
    monkeypatch.setenv("EVOFORGE_CUTLASS_INCLUDE", str(include))
    monkeypatch.setenv("EVOFORGE_CUTE_CACHE", str(cache))
    monkeypatch.setenv("EVOFORGE_CUTE_PREBUILT", str(tmp_path / "not-there"))  # a path that does not exist: no bind
    monkeypatch.setenv("EVOFORGE_CONTAINMENT", "auto")
    decided = containment.contain(directory=tmp_path / "c", writable=[str(tmp_path / "judge")], hide=[], devices=[])
    assert decided.mode == "bwrap", decided.why
    import subprocess

    probe = ("from evoforge.backends.cute import cutlass_include_dir, default_cache_dir; import os; "
             "print(cutlass_include_dir(), os.path.isdir(default_cache_dir()), "
             "os.access(str(default_cache_dir()), os.W_OK))")
    out = subprocess.run([decided.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-600:]
    assert out.stdout.split() == [str(include), "True", "False"]  # seen, and read-only


# ---------------------------------------------------------------- what the judge's Python imports from

RELU_WITH_HELPER = (FIXTURES / "relu" / "correct.py").read_text().replace("import torch\n", "import relu_helper\nimport torch\n", 1)


@pytest.fixture(scope="module")
def linked_environment(tmp_path_factory):
    """A virtual environment whose packages are reached only through a .pth pointing under /tmp, each package
    there a link into a store under /tmp (an installer that links from its cache, as uv does in CI), plus
    ``relu_helper``, installed editable (a finder a .pth installs maps it to a source folder under /tmp): the
    judge's own packages (torch, Triton, evoforge) and the kernel's helper all lie outside the interpreter's
    prefix and outside every ``sys.path`` entry."""
    import subprocess
    import sys
    import sysconfig

    root = tmp_path_factory.mktemp("linked-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    site_dir = next((root / "venv" / "lib").glob("python3*/site-packages"))
    pkgs, store = root / "pkgs", root / "store"
    pkgs.mkdir()
    store.mkdir()
    for base in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        for entry in sorted(Path(base).iterdir()):
            if entry.suffix == ".pth":  # editable installs' finders and the like, run as in the original
                shutil.copy(entry, site_dir / entry.name)
            elif not (pkgs / entry.name).exists() and entry.name != "__pycache__":
                (store / entry.name).symlink_to(entry)
                (pkgs / entry.name).symlink_to(store / entry.name)
    (site_dir / "00-packages.pth").write_text(f"{pkgs}\n")  # first: the .pth files after it import from there
    source = root / "src" / "relu_helper"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("ANSWER = 42\n")
    (pkgs / "__editable___relu_helper_finder.py").write_text(
        "import importlib.util, sys\n"
        f"MAPPING = {{'relu_helper': {str(source)!r}}}\n"
        "class _Finder:\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        "        if name in MAPPING:\n"
        "            return importlib.util.spec_from_file_location(name, MAPPING[name] + '/__init__.py',\n"
        "                                                          submodule_search_locations=[MAPPING[name]])\n"
        "def install():\n"
        "    sys.meta_path.append(_Finder)\n")
    (site_dir / "__editable__.relu_helper.pth").write_text(
        "import __editable___relu_helper_finder; __editable___relu_helper_finder.install()\n")
    kernel = root / "relu_with_helper.py"
    kernel.write_text(RELU_WITH_HELPER)
    return {"python": str(root / "venv" / "bin" / "python"), "kernel": kernel, "store": store, "root": root}


def _eval_in(environment: dict, **env: str):
    import subprocess

    return subprocess.run([environment["python"], "-m", "evoforge.cli", "eval", "L1/19", str(environment["kernel"]),
                           "--set", "batch_size=4", "--set", "dim=1000"], capture_output=True, text=True,
                          timeout=300, cwd=environment["root"], env={**os.environ, **env})


@needs_bwrap
def test_a_contained_candidate_sees_every_path_the_judges_python_imports_from(linked_environment):
    """Before, the contained candidate saw only the sys.path entries under /tmp: the store its packages link into
    and the helper's source were behind its private /tmp, and every kernel was `crashed` ("the candidate's
    process exited with code 1 (importing the candidate)", no cause) where EVOFORGE_CONTAINMENT=none gave `ok`."""
    proc = _eval_in(linked_environment, EVOFORGE_CONTAINMENT="bwrap")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "level1/19_ReLU on interpreter" in proc.stdout and ": ok" in proc.stdout, proc.stdout[-2000:]


@needs_bwrap
def test_a_hidden_folder_stays_hidden_and_a_candidate_that_cannot_load_says_why(linked_environment):
    """A folder containment hides on purpose (here the package store, named as a campaign names its run directory)
    stays hidden though the judge imports from it. No candidate's process can then load: the judge refuses to
    start, with the cause (the candidate's process's last error line, and the hidden folder) in one line, instead
    of a `crashed` for every candidate that said only "exited with code 1 (importing the candidate)"."""
    import subprocess

    store = str(linked_environment["store"])
    script = ("from evoforge.judge.evaluator import Evaluator\n"
              "from evoforge.core import Candidate, UsageError\n"
              "from evoforge.task import Task\n"
              f"evaluator = Evaluator(backend='interpreter', hide_paths=[{store!r}])\n"
              "task = Task.load('L1/19', overrides={'batch_size': 4, 'dim': 1000})\n"
              f"candidate = Candidate.from_source(open({str(FIXTURES / 'relu' / 'correct.py')!r}).read())\n"
              "try:\n"
              "    print('RESULT', evaluator.evaluate(task, candidate).status)\n"
              "except UsageError as e:\n"
              "    print('REFUSED', type(e).__name__, e)\n"
              "evaluator.close()\n")
    proc = subprocess.run([linked_environment["python"], "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=linked_environment["root"], env={**os.environ, "EVOFORGE_CONTAINMENT": "bwrap"})
    said = [line for line in proc.stdout.splitlines() if line.startswith(("RESULT", "REFUSED"))]
    assert len(said) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert said[0].startswith("REFUSED EvaluationEnvironmentError the evaluation process for backend interpreter "
                              "cannot start: a candidate's process cannot load evoforge's runner: "), said
    assert "No module named 'evoforge'" in said[0] and f"containment hides {store}" in said[0], said
