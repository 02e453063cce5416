"""Bad input to ``evoforge run``: one line naming the file or flag and the fix, exit code 2, no traceback.

Every case runs the real command line in its own process; they start together to keep the suite short.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

RUN = ["run", "--task", "L1/19", "--set", "batch_size=4", "--set", "dim=1000", "--backend", "interpreter",
       "--budget-evals", "2", "--quiet"]
SEED = str(FIXTURES / "relu" / "correct.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cases(tmp: Path) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (arguments, words the one line must carry)."""
    files = {
        "task_syntax.py": "import torch\nclass Model(torch.nn.Module)\n    pass\n",
        "task_no_inputs.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                              "        return x\ndef get_init_inputs():\n    return []\n"),
        "unknown_key.toml": "[campaign]\nbudget_eval = 3\n",
        "wrong_type.toml": "[campaign]\nbudget_evals = \"many\"\n",
        "not_toml.toml": "budget_evals: 3\n- this is YAML\n",
        "seed_not_python.py": "<html><body>a kernel</body></html>\n",
        "seed_binary.py": None,
    }
    for name, text in files.items():
        if text is None:
            (tmp / name).write_bytes(b"\xff\xfe\x00\x81 binary \x00\xc3")
        else:
            (tmp / name).write_text(text)
    not_a_run = tmp / "not_a_run"
    not_a_run.mkdir()
    corrupt_run = tmp / "corrupt_run"
    corrupt_run.mkdir()
    (corrupt_run / "config.json").write_text("{ truncated by a crash")
    out = ["--out", str(tmp / "run")]
    pg = f"postgresql+psycopg2://evoforge:hunter2-secret@127.0.0.1:{_free_port()}/evoforge"
    t = str(tmp)
    return {
        "task syntax error": (["run", "--task", f"{t}/task_syntax.py", "--seed-kernel", SEED, "--backend",
                               "interpreter", "--quiet", *out], ["task_syntax.py", "syntax error", "line 2"]),
        "task without get_inputs": (["run", "--task", f"{t}/task_no_inputs.py", "--seed-kernel", SEED,
                                     "--backend", "interpreter", "--quiet", *out], ["task_no_inputs.py", "get_inputs"]),
        "config unknown key": (["run", f"{t}/unknown_key.toml", *out], ["unknown_key.toml", "budget_eval", "known:"]),
        "config wrong type": (["run", f"{t}/wrong_type.toml", *out], ["wrong_type.toml", "budget_evals", "int"]),
        "config not TOML": (["run", f"{t}/not_toml.toml", *out], ["not_toml.toml", "not valid TOML"]),
        "config missing": (["run", f"{t}/no_such.toml", *out], ["no_such.toml", "not found"]),
        "seed kernel not Python": ([*RUN, "--seed-kernel", f"{t}/seed_not_python.py", *out],
                                   ["--seed-kernel", "seed_not_python.py", "not valid Python"]),
        "seed kernel not text": ([*RUN, "--seed-kernel", f"{t}/seed_binary.py", *out],
                                 ["--seed-kernel", "seed_binary.py", "cannot read"]),
        "storage does not connect": ([*RUN, "--seed-kernel", SEED, "--storage", pg, *out],
                                     ["--storage", "cannot connect", "***", "server is up"]),
        "resume of a directory that is no run": (["run", "--resume", str(not_a_run)], ["--resume", "not_a_run",
                                                                                       "not a run directory"]),
        "resume with a corrupt config.json": (["run", "--resume", str(corrupt_run)], ["corrupt_run", "run directory"]),
        "budget of zero": ([*RUN, "--seed-kernel", SEED, "--budget-evals", "0", *out], ["budget_evals", "at least 1"]),
        "no evaluators per GPU": ([*RUN, "--seed-kernel", SEED, "--evaluators-per-device", "0", *out],
                                  ["evaluators_per_device", "at least 1"]),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_input")
    cases = _cases(tmp)
    assert list(cases) == CASE_NAMES
    procs = {name: subprocess.Popen([sys.executable, "-m", "evoforge.cli", *args], cwd=REPO, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
             for name, (args, _words) in cases.items()}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        results[name] = (proc.returncode, out, err, cases[name][1])
    return results


CASE_NAMES = ["task syntax error", "task without get_inputs", "config unknown key", "config wrong type",
              "config not TOML", "config missing", "seed kernel not Python", "seed kernel not text",
              "storage does not connect", "resume of a directory that is no run",
              "resume with a corrupt config.json", "budget of zero", "no evaluators per GPU"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_is_one_line_exit_2(name, outcomes):
    code, out, err, words = outcomes[name]
    lines = err.strip().splitlines()
    assert code == 2, f"{name}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in err and len(lines) == 1, err[-2000:]
    assert lines[0].startswith("evoforge: error: ")
    for word in words:
        assert word in lines[0], f"{name}: {word!r} missing from: {lines[0]}"
    assert "hunter2-secret" not in err + out
