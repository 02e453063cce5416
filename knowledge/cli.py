"""``evoforge kb``: read the knowledge base and lint a candidate against it from the shell.

``kb lint`` is the validator a campaign runs before compiling, so a kernel author can see the same verdict
without a GPU; its exit code (1 when a hard rule breaks) makes it usable in scripts and CI.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from evoforge.knowledge.hardware import arch_names, ceilings, hardware_summary, load_arch, resolve_arch
from evoforge.knowledge.legality import validate
from evoforge.knowledge.rulebook import installed_triton_version, rules
from evoforge.knowledge.stages import STAGE_NAMES

from evoforge.core import Candidate, UsageError


def add_subparser(subparsers: Any) -> None:
    """Register ``kb`` on the main CLI's subparsers; each subcommand's ``func(args)`` returns the exit code."""
    kb = subparsers.add_parser("kb", help="hardware facts, rules and lint from the knowledge base")
    sub = kb.add_subparsers(dest="kb_command", required=True)

    show = sub.add_parser("show", help="hardware facts and ceilings of one arch")
    show.add_argument("arch", help=f"one of {', '.join(arch_names())} (or an alias such as h100, b580)")
    show.add_argument("--json", action="store_true", help="print the whole spec as JSON")
    show.set_defaults(func=cmd_show)

    lst = sub.add_parser("rules", help="list rules, optionally for one arch, stage and Triton version")
    lst.add_argument("--arch", default=None)
    lst.add_argument("--stage", default=None, choices=STAGE_NAMES)
    lst.add_argument("--triton", default=None, help="Triton version the rules must hold for (default: any)")
    lst.add_argument("--language", default="triton", choices=["triton", "cute"],
                     help="the kernel language the rules are written for (default: triton)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_rules)

    lint = sub.add_parser("lint", help="check a candidate module against the rules of an arch")
    lint.add_argument("candidate", help="path to a candidate .py (defines ModelNew, SPACE, PARAMS)")
    lint.add_argument("--arch", default=None,
                      help="knowledge-base arch to hold the kernel to (default: the device's, as eval and run)")
    lint.add_argument("--triton", default=None, help="Triton version to judge against (default: installed)")
    lint.add_argument("--json", action="store_true", help="print the verdict as one JSON object on the last line")
    lint.set_defaults(func=cmd_lint)


def cmd_show(args: argparse.Namespace) -> int:
    key = resolve_arch(args.arch)
    if args.json:
        print(json.dumps({**load_arch(key), "ceilings": ceilings(key)}, indent=1, default=str))
    else:
        print(hardware_summary(key))
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    chosen = rules(args.arch, stage=args.stage, triton_version=args.triton, language=args.language)
    if args.json:
        print(json.dumps([r.to_dict() for r in chosen]))
        return 0
    width = max((len(r.id) for r in chosen), default=0)
    for r in chosen:
        scope = ",".join(r.archs or r.vendors) + (f" triton{r.triton}" if r.triton else "")
        print(f"{r.id:<{width}}  {r.severity:<6}  {r.stage:<17}  {r.title}  [{scope}]")
    return 0


def _device_arch() -> str:
    """The arch ``eval`` and ``run`` hold a kernel to when ``--arch`` is left out: the device's."""
    from evoforge.backends.registry import available_backend

    return available_backend("auto").arch


def cmd_lint(args: argparse.Namespace) -> int:
    path = Path(args.candidate)
    if not path.is_file():
        raise UsageError(f"{path}: no such candidate file (give the path to a candidate .py)")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise UsageError(f"{path}: syntax error at line {e.lineno}: {e.msg}") from None
    key = resolve_arch(args.arch or _device_arch())
    version = args.triton or installed_triton_version()
    violations = validate(Candidate.from_source(source), key, triton_version=version)
    hard = [v for v in violations if v.severity == "hard"]
    for v in violations:
        where = f"{path}:{v.line}" if v.line else str(path)
        print(f"{where}: {v.severity}: [{v.rule}] {v.message}")
    summary = f"{len(hard)} hard, {len(violations) - len(hard)} advice ({key}, Triton {version or 'unknown'})"
    print(summary)
    if args.json:
        print(json.dumps({"candidate": str(path), "arch": key, "triton": version, "ok": not hard,
                          "violations": [v.to_dict() for v in violations]}))
    return 1 if hard else 0
