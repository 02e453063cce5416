"""``evoforge kb``: show, rules and lint, with the exit codes and JSON a script relies on."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from evoforge.knowledge.cli import add_subparser

from evoforge.core import UsageError
from tests.conftest import cli_main
from tests.knowledge.kernels import MATMUL, VECTOR_ADD, with_launch

REPO = Path(__file__).resolve().parents[2]


def kb(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="evoforge")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["kb", *argv])
    return args.func(args)


def write(tmp_path: Path, source: str, name: str = "cand.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def test_lint_json_lists_hard_violations_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = with_launch(MATMUL, 'num_warps=PARAMS["num_warps"]', "num_warps=3")
    source = source.replace('"BLOCK_K": 64, "num_warps": 4, "num_stages": 3}',
                            '"BLOCK_K": 128, "num_warps": 4, "num_stages": 5}').replace(
        '"BLOCK_M": 128, "BLOCK_N": 128', '"BLOCK_M": 256, "BLOCK_N": 256')
    assert kb("lint", write(tmp_path, source), "--arch", "nvidia-sm90", "--json") == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    verdict = json.loads(last)
    hard = {v["rule"] for v in verdict["violations"] if v["severity"] == "hard"}
    assert hard == {"num-warps-legal", "shared-memory-budget", "accumulator-registers"}
    assert verdict["ok"] is False
    assert all(set(v) == {"rule", "severity", "message", "line"} for v in verdict["violations"])
    assert all(isinstance(v["line"], int) for v in verdict["violations"])


def test_lint_of_a_clean_kernel_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kb("lint", write(tmp_path, VECTOR_ADD), "--arch", "h100", "--json") == 0
    verdict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert verdict == {**verdict, "ok": True, "violations": [], "arch": "nvidia-sm90"}


def test_lint_without_arch_holds_the_kernel_to_the_devices_arch_as_eval_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--arch`` was required by ``kb lint`` and optional everywhere else (issue 18)."""
    from evoforge.backends.registry import available_backend

    assert kb("lint", write(tmp_path, VECTOR_ADD), "--json") == 0
    verdict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert verdict["arch"] == available_backend("auto").arch


def test_lint_version_flag_decides_versioned_rules(tmp_path: Path) -> None:
    from tests.knowledge.kernels import BLOCK_PTR_COPY

    path = write(tmp_path, BLOCK_PTR_COPY)
    assert kb("lint", path, "--arch", "nvidia-sm90", "--triton", "3.6.0") == 0
    assert kb("lint", path, "--arch", "nvidia-sm90", "--triton", "3.7.0") == 1


def test_lint_refuses_a_missing_file_and_an_unknown_arch(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nowhere\.py: no such candidate file"):
        kb("lint", str(tmp_path / "nowhere.py"), "--arch", "nvidia-sm90")
    with pytest.raises(UsageError, match="--arch gfx942: unknown"):
        kb("lint", write(tmp_path, VECTOR_ADD), "--arch", "gfx942")
    with pytest.raises(UsageError, match="syntax error at line 1"):
        kb("lint", write(tmp_path, "def f(:\n", "bad.py"), "--arch", "nvidia-sm90")


def test_show_and_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert kb("show", "nvidia-sm90") == 0
    assert "232448" in capsys.readouterr().out
    assert kb("show", "intel-xe2", "--json") == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["id"] == "intel-xe2" and spec["ceilings"]["bandwidth_gbs"] == 456
    assert kb("rules", "--arch", "intel-xe2", "--stage", "device_specific") == 0
    out = capsys.readouterr().out
    assert "intel-grf-mode" in out and "shared-memory-budget" not in out


def test_the_main_cli_dispatches_kb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, with_launch(VECTOR_ADD, 'num_warps=PARAMS["num_warps"]', "num_warps=3"))
    proc = cli_main(capsys, "kb", "lint", str(path), "--arch", "nvidia-sm90", "--json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["violations"][0]["rule"] == "num-warps-legal"
