"""Where L1/19-style tasks come from (issue W): ``--kernelbench``, a config's ``kernelbench``, ``$EVOFORGE_KERNELBENCH``,
the fetch cache, ``../shared/kernelbench`` beside a checkout, in that order; every way in named in ``--help`` and, when
none finds KernelBench, in the one-line error; a spec the folder lacks names the nearest problems instead.

Each case runs the ``evoforge`` command from an empty folder, as a user does; KernelBench folders are small copies of a
few real problems, so which one was used shows in the error a missing problem number gives (its folder and how it
was found).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, kernelbench_dir

WAYS_IN = ("--kernelbench", 'kernelbench = "DIR"', "EVOFORGE_KERNELBENCH", "evoforge kernelbench fetch")


def evoforge(*argv: str, cwd: Path, env: dict[str, str] | None = None,
             python: str | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("EVOFORGE_KERNELBENCH", "XDG_CACHE_HOME")}
    base["XDG_CACHE_HOME"] = str(cwd / "empty-cache")  # no fetched copy unless a test puts one there
    command = [sys.executable, "-c", python] if python else [str(Path(sys.executable).parent / "evoforge")]
    return subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**base, **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert lines[0].startswith("evoforge: error: ")
    return lines[0]


def fake_kernelbench(folder: Path, *names: str) -> Path:
    """A KernelBench folder holding a few real level-1 problems."""
    (folder / "level1").mkdir(parents=True)
    for name in names or ("19_ReLU.py", "20_LeakyReLU.py"):
        shutil.copy(kernelbench_dir() / "level1" / name, folder / "level1" / name)
    return folder


@pytest.fixture
def home(tmp_path):
    """An empty working folder, with four KernelBench copies beside it and a config naming one of them."""
    work = tmp_path / "work"
    work.mkdir()
    kb = {name: fake_kernelbench(tmp_path / name) for name in ("flag", "config", "env")}
    kb["cache"] = fake_kernelbench(tmp_path / "cache" / "evoforge" / "kernelbench")
    (work / "campaign.toml").write_text('[campaign]\nname = "kb"\nkernelbench = "../config"\n\n'
                                        '[[tasks]]\nspec = "L1/18"\n')
    return work, kb


def found_by(line: str) -> str:
    """``... (DIR/level1, from HOW); nearest: ...`` -> ``DIR (HOW)``."""
    assert "has no problem 18" in line and "nearest: L1/19 (19_ReLU)" in line, line
    where = line.split("has no problem 18 (", 1)[1].split("); nearest", 1)[0]
    folder, how = where.split(", from ", 1)
    return f"{Path(folder).parent.name} ({how})"


def test_each_way_in_outranks_the_next(home):
    work, kb = home
    cache = {"XDG_CACHE_HOME": str(kb["cache"].parent.parent)}
    env = {**cache, "EVOFORGE_KERNELBENCH": str(kb["env"])}
    run = ("run", "campaign.toml", "--backend", "interpreter")
    # --kernelbench over the config's key, the variable and the cache
    assert found_by(one_line_error(evoforge(*run, "--kernelbench", str(kb["flag"]), cwd=work, env=env))) \
        == "flag (--kernelbench)"
    assert found_by(one_line_error(evoforge("eval", "L1/18", "k.py", "--kernelbench", str(kb["flag"]), cwd=work,
                                            env=env))) == "flag (--kernelbench)"
    # the config's key (relative to the config file) over the variable and the cache
    line = one_line_error(evoforge(*run, cwd=work, env=env))
    assert found_by(line) == "config (kernelbench in config campaign.toml)", line
    # the variable over the cache
    assert found_by(one_line_error(evoforge("eval", "L1/18", "k.py", cwd=work, env=env))) \
        == "env (EVOFORGE_KERNELBENCH)"
    # the cache over the checkout's ../shared/kernelbench
    assert found_by(one_line_error(evoforge("eval", "L1/18", "k.py", cwd=work, env=cache))) \
        == "kernelbench (the cache of `evoforge kernelbench fetch`)"


def test_a_checkout_still_finds_shared_kernelbench(tmp_path):
    """``make test`` and ``make demo`` from a clone: nothing set, nothing fetched, ../shared/kernelbench is used."""
    if REPO.parent / "shared" / "kernelbench" != kernelbench_dir():
        pytest.skip("this checkout has no ../shared/kernelbench beside it")
    proc = evoforge("kernelbench", "where", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"KernelBench {kernelbench_dir()} (beside the checkout: ../shared/kernelbench)"


def test_an_installed_evoforge_with_no_kernelbench_names_every_way_in(tmp_path):
    """As after ``pip install`` of the wheel: no checkout around the package, nothing set or fetched. The error names
    the flag, the config key, the variable and the fetch command (and where fetch puts it), in one line, exit 2."""
    as_installed = ("import sys, evoforge.task as task\n"
                    "task._checkout_kernelbench = lambda: None  # the wheel has no checkout around it\n"
                    "from evoforge.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    line = one_line_error(evoforge("eval", "L1/19", "k.py", cwd=tmp_path, python=as_installed))
    assert "KernelBench not found" in line
    for way in WAYS_IN:
        assert way in line, (way, line)
    assert str(tmp_path / "empty-cache" / "evoforge" / "kernelbench") in line
    version = evoforge("--version", cwd=tmp_path, python=as_installed)
    assert version.returncode == 0 and "KernelBench not found (evoforge kernelbench fetch" in version.stdout


def test_a_folder_the_user_named_that_is_not_kernelbench_is_blamed_by_its_name(tmp_path):
    line = one_line_error(evoforge("eval", "L1/19", "k.py", cwd=tmp_path,
                                   env={"EVOFORGE_KERNELBENCH": str(tmp_path / "nowhere")}))
    assert "nowhere (from EVOFORGE_KERNELBENCH) is not a KernelBench folder" in line
    line = one_line_error(evoforge("eval", "L1/19", "k.py", "--kernelbench", str(tmp_path), cwd=tmp_path))
    assert f"{tmp_path} (from --kernelbench) is not a KernelBench folder" in line


def test_a_clone_of_kernelbench_works_as_it_is(tmp_path):
    """A git clone keeps its levels in KernelBench/: --kernelbench takes the clone's root too."""
    fake_kernelbench(tmp_path / "clone" / "KernelBench")
    line = one_line_error(evoforge("eval", "L1/18", "k.py", "--kernelbench", str(tmp_path / "clone"), cwd=tmp_path))
    assert found_by(line) == "KernelBench (--kernelbench)"


@pytest.mark.parametrize(("spec", "words"), [
    ("L1/999", ["KernelBench level 1 has no problem 999", "nearest: L1/98 (98_KLDivLoss), L1/99 "
                "(99_TripletMarginLoss), L1/100 (100_HingeLoss)"]),
    ("L3/1", ["has no level3", "it has level1, level2"]),
    ("level1/19_Relu.py", ["file not found", "nearest in", "level1/19_ReLU.py"]),
])
def test_a_misspelled_task_says_what_is_there_not_that_kernelbench_is_missing(tmp_path, spec, words):
    line = one_line_error(evoforge("eval", spec, "k.py", "--kernelbench", str(kernelbench_dir()), cwd=tmp_path))
    for word in words:
        assert word in line, (word, line)
    assert "not found: give" not in line and "EVOFORGE_KERNELBENCH=DIR" not in line


@pytest.mark.parametrize("command", [["eval"], ["run"], ["quickstart"], ["prompt"], ["ablate"], ["dashboard"]])
def test_help_names_every_way_in_in_order(tmp_path, command):
    proc = evoforge(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    positions = [text.find(w) for w in ("--kernelbench DIR", 'kernelbench = "DIR"', "$EVOFORGE_KERNELBENCH",
                                        "evoforge kernelbench fetch", "../shared/kernelbench")]
    assert -1 not in positions and positions == sorted(positions), (positions, text[-800:])


def test_version_and_backends_say_which_kernelbench_and_how(home):
    work, kb = home
    env = {"EVOFORGE_KERNELBENCH": str(kb["env"])}
    version = evoforge("--version", cwd=work, env=env)
    lines = version.stdout.strip().splitlines()
    assert version.returncode == 0 and len(lines) == 1, version.stderr
    assert lines[0].startswith("evoforge 0.1.0 (") and f"KernelBench {kb['env']} (EVOFORGE_KERNELBENCH)" in lines[0]
    backends = evoforge("backends", cwd=work, env=env)
    assert backends.returncode == 0, backends.stderr
    assert backends.stdout.strip().splitlines()[-1] == f"tasks like L1/19 from KernelBench {kb['env']} " \
                                                       "(EVOFORGE_KERNELBENCH)"


def test_the_flag_holds_for_its_command_only(tmp_path):
    """In one process (a notebook, the test suite) the flag of one command does not leak into the next."""
    from evoforge.cli import main
    from evoforge.task import locate_kernelbench

    before = locate_kernelbench()
    fake = fake_kernelbench(tmp_path / "kb")
    assert main(["eval", "L1/19", str(tmp_path / "missing.py"), "--kernelbench", str(fake)]) == 2
    assert locate_kernelbench() == before


def test_a_config_key_is_kept_for_a_resume(tmp_path):
    """The config's kernelbench is read relative to the file, and its L-specs become files there, so config.json
    (what --resume reads) names the same tasks without the key's folder being found again."""
    from evoforge.config import load_config

    fake_kernelbench(tmp_path / "kb")
    (tmp_path / "c.toml").write_text('[campaign]\nkernelbench = "kb"\n[[tasks]]\nspec = "L1/19"\n')
    config = load_config(str(tmp_path / "c.toml"))
    assert config.kernelbench == str(tmp_path / "kb")
    assert config.tasks[0].spec == str(tmp_path / "kb" / "level1" / "19_ReLU.py")
