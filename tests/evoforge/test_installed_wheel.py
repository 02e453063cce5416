"""evoforge installed as a wheel (not editable) and run from a checkout's root (issue V, part 2).

The checkout's top-level ``evoforge/`` holds only part of the package (pyproject.toml maps ``backends/``,
``search/``, ``mutators/`` and ``knowledge/`` into it), so every process that puts its current folder on
``sys.path`` found that partial folder before the installed package. A campaign started there ended with exit 0
and every candidate ``crashed``: the Inductor capture subprocess said "No module named 'evoforge.mutators'" and
Ray's workers "No module named 'evoforge.backends'", each message cut before its cause. Now the processes evoforge
starts import the installed package whatever the current folder, and a command that is itself shadowed refuses in
one line naming the cause and the fix.

Real parts: a wheel built from this checkout, installed into a fresh virtual environment (torch and the rest
reached through a .pth to this interpreter's site-packages, to keep it cheap), run from a folder holding a copy of
the checkout's ``evoforge/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.conftest import REPO, kernelbench_dir
from tests.evoforge.test_kernelbench_fetch import server  # noqa: F401, F811  (the loopback server serving KernelBench)

pytestmark = pytest.mark.slow  # a wheel, a virtual environment, a campaign with a capture: about a minute
CAMPAIGN = ["run", "--set", "batch_size=4", "--set", "dim=1000", "--backend", "interpreter", "--budget-evals", "1",
            "--workers", "1", "--quiet"]
# The folders pyproject.toml maps the packages to (a folder added there is built and copied here too).
PACKAGE_FOLDERS = tuple(sorted(set(__import__("tomllib").loads((REPO / "pyproject.toml").read_text())
                                   ["tool"]["setuptools"]["package-dir"].values())))


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory):
    missing = [name for name in ("pip", "setuptools") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"cannot build a wheel here: {' and '.join(missing)} not installed in this environment")
    root = tmp_path_factory.mktemp("wheel-install")
    source = root / "source"  # a copy: an in-tree build would leave build/ and egg-info in the checkout
    for name in PACKAGE_FOLDERS:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(root / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((root / "dist").glob("evoforge-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                                "--no-deps", "--no-index", "-q", str(wheel)], capture_output=True, text=True,
                               timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    site_dir = next((venv / "lib").glob("python3*/site-packages"))
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (site_dir / "zz-base-packages.pth").write_text("".join(f"{p}\n" for p in paths))  # after its own evoforge
    checkout = root / "checkout"  # the folder a user runs from: the checkout's partial evoforge/ in it
    shutil.copytree(REPO / "evoforge", checkout / "evoforge", ignore=shutil.ignore_patterns("__pycache__"))
    # The same wheel unpacked in a folder of its own, and an environment without it (base packages only).
    vendored = subprocess.run([sys.executable, "-m", "pip", "install", "--target", str(root / "vendored"),
                               "--no-deps", "--no-index", "-q", str(wheel)], capture_output=True, text=True,
                              timeout=300)
    assert vendored.returncode == 0, vendored.stderr[-2000:]
    bare = root / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    shutil.copy(site_dir / "zz-base-packages.pth", next((bare / "lib").glob("python3*/site-packages")))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["EVOFORGE_KERNELBENCH"] = str(kernelbench_dir())  # an installed evoforge finds no KernelBench by itself
    return {"bin": venv / "bin", "checkout": checkout, "root": root, "env": env, "bare": bare / "bin" / "python",
            "vendored": root / "vendored"}


def _run(install: dict, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600,
                          cwd=install["checkout"], env={**install["env"], **(env or {})})


def test_the_installed_package_is_the_wheel(wheel_install):
    """The set-up itself: outside the checkout, the virtual environment imports the wheel's evoforge, whole."""
    proc = subprocess.run([str(wheel_install["bin"] / "python"), "-c",
                           "import evoforge, evoforge.judge.sandbox as s; print(s.__file__)"],
                          capture_output=True, text=True, timeout=120, cwd=wheel_install["root"],
                          env=wheel_install["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "site-packages/evoforge/judge/sandbox.py" in proc.stdout, proc.stdout


def test_a_campaign_from_a_checkout_root_imports_the_installed_package_in_every_process(wheel_install):
    """The Inductor capture (no template serves L1/20), Ray's evaluation actor, the judge and the candidate's
    process all start from the checkout's root: the seed is captured and evaluated ``ok``, not ``crashed``."""
    out = wheel_install["root"] / "run"
    proc = _run(wheel_install, wheel_install["bin"] / "evoforge", *CAMPAIGN, "--task", "L1/20", "--out", out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    statuses = summary["tasks"]["level1/20_LeakyReLU"]["statuses"]
    assert statuses.get("ok", 0) >= 1 and "crashed" not in statuses, statuses


def test_a_command_that_is_itself_shadowed_refuses_in_one_line(wheel_install):
    """``python -m evoforge.cli`` from the checkout's root (its current folder first on sys.path), and the
    ``evoforge`` command with the checkout's root on PYTHONPATH, find the partial folder before the wheel: exit 2,
    one line naming the folder and the fix, not a traceback ending in "No module named 'evoforge.mutators'"."""
    folder = str(wheel_install["checkout"] / "evoforge")
    for argv, env in (([wheel_install["bin"] / "python", "-m", "evoforge.cli", "--version"], None),
                      ([wheel_install["bin"] / "evoforge", "--version"], {"PYTHONPATH": str(wheel_install["checkout"])})):
        proc = _run(wheel_install, *argv, env=env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
        assert lines[0].startswith(f"evoforge: error: {folder} is only part of the evoforge package")
        assert "run from another folder, or install this checkout with `pip install -e .`" in lines[0]


def test_a_campaign_whose_evaluators_cannot_import_evoforge_stops_at_start_up_in_one_line(wheel_install):
    """A driver that found evoforge through a path of its own (``sys.path.insert``, as a notebook or a script beside
    a vendored copy does) starts Ray's workers without it: no evaluation actor can even be made. The campaign
    stops before its first evaluation, exit 2, one line with the cause, where it recorded every candidate
    ``crashed`` (the message cut before its cause, in colour codes) and ended with exit 0."""
    out = wheel_install["root"] / "unimportable-run"
    argv = [*CAMPAIGN, "--task", "L1/19", "--seed-kernel", str(REPO / "tests" / "fixtures" / "relu" / "correct.py"),
            "--out", str(out)]
    script = (f"import sys; sys.path.insert(0, {str(wheel_install['vendored'])!r})\n"
              f"from evoforge.cli import main\nsys.exit(main({argv!r}))\n")
    proc = subprocess.run([str(wheel_install["bare"]), "-c", script], capture_output=True, text=True, timeout=600,
                          cwd=wheel_install["root"], env=wheel_install["env"])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert lines[-1].startswith("evoforge: error: the evaluation actors cannot start: ModuleNotFoundError: No module "
                                "named 'evoforge'"), lines[-3:]
    assert "\x1b" not in lines[-1]
    assert not (out / "config.json").exists()  # nothing that makes a corrected retry look like a second campaign


def test_a_pip_user_gets_kernelbench_by_name_the_quickstart_and_the_python_api_from_an_empty_folder(
        wheel_install, server):  # noqa: F811
    """The wheel in a fresh environment, run from an empty folder with no KernelBench anywhere it looks (no
    variable, an empty cache, not a checkout): a task by name says every way in, in one line; ``--kernelbench``
    finds it; ``evoforge kernelbench fetch`` (a loopback server, checksum given) fills the cache, after which the
    quickstart runs as ``make demo`` runs it, and the Python API evaluates a kernel."""
    url, sums = server
    folder = wheel_install["root"] / "pip-user"
    folder.mkdir()
    env = {k: v for k, v in wheel_install["env"].items() if k != "EVOFORGE_KERNELBENCH"}
    env.update(XDG_CACHE_HOME=str(wheel_install["root"] / "pip-cache"), HOME=str(wheel_install["root"] / "pip-home"))
    kernel = REPO / "tests" / "fixtures" / "relu" / "correct.py"
    evoforge = str(wheel_install["bin"] / "evoforge")
    eval_argv = [evoforge, "eval", "L1/19", str(kernel), "--backend", "interpreter", "--set", "batch_size=8", "--set",
                 "dim=1000", "--json"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=folder, env=env)

    proc = run(*eval_argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert all(way in lines[0] for way in ("--kernelbench", "EVOFORGE_KERNELBENCH", "evoforge kernelbench fetch"))
    proc = run(*eval_argv, "--kernelbench", kernelbench_dir())
    assert proc.returncode == 0 and json.loads(proc.stdout.strip().splitlines()[-1])["status"] == "ok", proc.stderr
    proc = run(evoforge, "kernelbench", "fetch", "--url", f"{url}/kb.tar.gz", "--sha256", sums["kb.tar.gz"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run(evoforge, "quickstart", "--out", "run", "--budget-evals", "1", "--backend", "interpreter",
               "--workers", "1", "--quiet", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(summary["tasks"]) == ["level1/23_Softmax", "level1/40_LayerNorm", "level1/88_MinGPTNewGelu",
                                        "level1/95_CrossEntropyLoss"]
    assert all(t["statuses"].get("ok", 0) >= 1 for t in summary["tasks"].values()), summary["tasks"]
    script = ("import evoforge\n"
              f"r = evoforge.evaluate('L1/19', {str(kernel)!r}, backend='interpreter', set={{'batch_size': 8, "
              "'dim': 1000})\nprint(r.status, type(r).__name__)\n")
    proc = run(wheel_install["bin"] / "python", "-c", script)
    assert proc.returncode == 0 and proc.stdout.split() == ["ok", "KernelResult"], proc.stdout + proc.stderr[-2000:]
