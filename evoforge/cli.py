"""The ``evoforge`` command line. Every user mistake ends in one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from evoforge.core import Candidate, DeprecatedFlag, EvalStatus, UsageError, check_params
from evoforge.task import (
    Task,
    chosen_kernelbench,
    kernelbench_flag_help,
    locate_kernelbench,
    parse_allow_ops,
    parse_assignments,
    parse_shapes,
    read_candidate_file,
)

# Commands that resolve L1/23-style tasks: each takes --kernelbench DIR (run and quickstart add their own).
TAKES_KERNELBENCH = ("eval", "prompt", "ablate", "dashboard")


def add_kernelbench_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernelbench", metavar="DIR", help=kernelbench_flag_help())


def _set_flags(values: list[str] | None, flag: str = "--set") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values or []:
        out.update(parse_assignments(v, flag=flag))
    return out


def make_evaluator(*, backend_name: str, arch: str | None, trials: int, timeout_s: float, knowledge: bool,
                   timing: bool = True, seed: int = 42) -> Any:
    """The evaluator ``--backend`` names, or one line saying why that backend cannot run here."""
    from evoforge.backends.registry import available_backend
    from evoforge.judge.evaluator import Evaluator
    from evoforge.judge.options import ChainOptions

    backend = available_backend(backend_name, arch=arch)
    return Evaluator(backend=backend.name, arch=backend.arch, timeout_s=timeout_s, knowledge=knowledge,
                     options=ChainOptions(trials=trials, timing=timing, seed=seed))


def warn_about_inputs(task: Task, backend: Any) -> None:
    """Shapes the task cannot draw inputs at are a UsageError; inputs too big for the backend, a warning."""
    from evoforge.judge.task_inputs import check_task_inputs, size_warning

    size = check_task_inputs(task)
    warning = size_warning(task, size, host=backend.device_count() == 0, backend=backend.name)
    if warning:
        print(f"evoforge: warning: {warning}", file=sys.stderr, flush=True)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.correctness_runs < 1:
        raise UsageError("--correctness-runs must be at least 1")
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    task = Task.load(args.task, overrides=_set_flags(args.set), shapes=parse_shapes(args.shapes),
                     allow_ops=parse_allow_ops(args.allow_ops))
    source = read_candidate_file(args.candidate)
    params = _set_flags(args.param, "--param")
    check_params(source, params, where=f"--param (in {args.candidate})")
    candidate = Candidate.from_source(source, task=task.name, params=params, language=args.language)
    if args.compile_only:
        if candidate.language != "cute":
            raise UsageError(f"--compile-only: {args.candidate} is a Triton kernel; --compile-only is for "
                             "--language cute (a Triton kernel compiles when it first runs)")
        from evoforge.judge.static import compile_only

        return _report(task, compile_only(candidate, args.arch or "nvidia-sm90"), args.json)
    from evoforge.backends.registry import available_backend

    backend = available_backend(args.backend, arch=args.arch)
    warn_about_inputs(task, backend)  # before an evaluator starts: a bad shape is one line at once
    evaluator = make_evaluator(backend_name=backend.name, arch=args.arch, trials=args.correctness_runs,
                               timeout_s=args.timeout, knowledge=not args.no_kb, timing=not args.no_timing)
    timed = not args.no_timing and (args.compile_baseline == "on" or (args.compile_baseline == "auto"
                                                                       and backend.device_count() > 0))
    try:
        result = evaluator.evaluate(task, candidate)
        baseline = evaluator.compile_baseline(task) if timed and result.ok else None
    finally:
        evaluator.close()
    return _report(task, result, args.json, baseline=baseline,
                   untimed="" if timed else ("--no-timing" if args.no_timing else
                                             "not timed on the interpreter (--compile-baseline on times it)"
                                             if args.compile_baseline == "auto" else "--compile-baseline off"))


def compile_figures(result: Any, baseline: Any, untimed: str = "") -> dict[str, Any]:
    """A result beside torch.compile's build of the reference: its time, its speedup over the reference, the
    result's speed over it; where it was not timed, why."""
    if baseline is None:
        return {"compile_ms": None, "compile_speedup": None, "vs_compile": None,
                "compile_baseline": untimed or "not timed (the kernel is not correct)"}
    if not baseline.ok or not baseline.speedup:
        return {"compile_ms": None, "compile_speedup": None, "vs_compile": None,
                "compile_baseline": f"failed: {baseline.message}"}
    vs = result.speedup / baseline.speedup if result.ok and result.speedup else None
    return {"compile_ms": baseline.runtime_ms, "compile_speedup": baseline.speedup, "vs_compile": vs,
            "compile_baseline": "timed"}


def _report(task: Task, result: Any, as_json: bool, *, baseline: Any = None, untimed: str = "") -> int:
    d = result.to_dict()
    figures = compile_figures(result, baseline, untimed) if result.status is not None else {}
    if as_json:
        print(json.dumps({k: d[k] for k in d if k != "versions"} | figures | {"versions": d["versions"]}))
    else:
        _print_result(task, result, figures)
    return 0 if result.status is EvalStatus.OK else 1


def _print_result(task: Task, result: Any, figures: dict[str, Any] | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    colour = "green" if result.ok else "red"  # the colours are ours; the names (a task file's) printed literally
    console.print(f"[bold]{escape(task.name)}[/bold] on {escape(f'{result.backend} ({result.arch})')}: "
                  f"[{colour}]{escape(f'{result.status}')}[/{colour}]")
    if result.ok and result.max_abs_err is not None:  # a compile-only result has no correctness to show
        console.print(f"  correct ({result.criterion}); max abs err {result.max_abs_err:.3g}")
    if result.ok:
        if result.runtime_ms is not None:
            console.print(f"  candidate {result.runtime_ms:.4g} ms, reference {result.ref_ms:.4g} ms, "
                          f"speedup {result.speedup:.3g}x")
            figures = figures or {}
            if figures.get("vs_compile") is not None:
                console.print(f"  torch.compile {figures['compile_ms']:.4g} ms ({figures['compile_speedup']:.3g}x "
                              f"the reference): the candidate runs at {figures['vs_compile']:.3g}x torch.compile")
            elif figures.get("compile_baseline"):
                console.print(f"  torch.compile: {figures['compile_baseline']}", markup=False, highlight=False)
        if result.pct_of_floor is not None:
            console.print(f"  {result.pct_of_floor:.1f}% of the physical floor ({result.floor_ms:.4g} ms)")
    if result.message:
        console.print(f"  {result.message}", markup=False, highlight=False)


def cmd_backends(args: argparse.Namespace) -> int:
    from evoforge.backends.registry import backend_names, get_backend

    rows = []
    for name in backend_names():
        try:
            ok, reason = get_backend(name).available()
        except Exception as e:  # a broken driver must not hide the other backends
            ok, reason = False, f"{e.__class__.__name__}: {e}"
        rows.append({"backend": name, "available": ok, "reason": reason})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['backend']:<12} {'available' if r['available'] else 'unavailable':<12} {r['reason']}")
        print(f"tasks like L1/19 from {locate_kernelbench().describe()}")
    return 0


def _add_eval(sub: Any) -> None:
    p = sub.add_parser("eval", help="run one candidate through the verification chain")
    p.add_argument("task", help="KernelBench-format task file (or L1/23 for KernelBench level 1 problem 23, "
                                "found where --kernelbench says)")
    p.add_argument("candidate", help="module defining ModelNew")
    p.add_argument("--backend", default="auto", help="auto, cuda, xpu or interpreter (default: auto)")
    p.add_argument("--arch", default=None, help="knowledge-base arch to hold the kernel to (default: the device's)")
    p.add_argument("--set", action="append", metavar="K=V", help="override a task constant before inputs are drawn")
    p.add_argument("--shapes", default=None, help='extra correctness shapes: "batch_size=16,dim=1000;batch_size=3"')
    p.add_argument("--param", action="append", metavar="K=V", help="set a tunable parameter of the candidate")
    p.add_argument("--correctness-runs", type=int, default=3, metavar="N",
                   help="runs with fresh random inputs, each compared with the reference (default 3)")
    p.add_argument("--trials", dest="correctness_runs", type=int, action=DeprecatedFlag, new="--correctness-runs",
                   help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before the evaluation is killed")
    p.add_argument("--language", default=None, choices=["triton", "cute"],
                   help="the kernel language (default: the candidate's own: LANGUAGE = \"cute\", or a CUDA_SRC "
                        "loaded through evoforge.backends.cute, is CuTe)")
    p.add_argument("--compile-only", action="store_true",
                   help="cute only: compile with nvcc for --arch (default nvidia-sm90) and stop; needs no GPU")
    p.add_argument("--no-kb", action="store_true", help="skip the knowledge base's hard-rule check")
    p.add_argument("--no-timing", action="store_true", help="check correctness only")
    p.add_argument("--allow-ops", metavar="OP,...",
                   help="ATen ops the kernel may leave to PyTorch (cuBLAS/cuDNN), e.g. addmm,convolution")
    p.add_argument("--compile-baseline", choices=["auto", "on", "off"], default="auto",
                   help="time torch.compile's default build of the reference beside the kernel (auto: on a GPU)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    p.set_defaults(func=cmd_eval)


def _subsystem_subparsers() -> list[Callable[[Any], None]]:
    """Subcommands that live beside their subsystem; each module registers its own."""
    from evoforge import campaign_cli, experiments_cli, kernelbench_fetch
    from evoforge.knowledge import cli as kb_cli
    from evoforge.mutators import cli as llm_cli
    from evoforge.search import bench

    return [campaign_cli.add_subparser, kb_cli.add_subparser, bench.add_subparser, llm_cli.add_subparser,
            experiments_cli.add_subparser, kernelbench_fetch.add_subparser]


def version_line() -> str:
    """``evoforge --version``: evoforge's and the versions that change a result, read without importing them."""
    from importlib import metadata

    from evoforge import __version__

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    others = ", ".join(f"{name} {installed(name)}" for name in ("torch", "triton", "optuna", "ray"))
    return f"evoforge {__version__} ({others}; Python {sys.version.split()[0]}; {locate_kernelbench().describe()})"


class _Version(argparse.Action):
    """``--version`` as one unwrapped line (argparse's own wraps it to the terminal's width)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evoforge", description="Search for fast, correct GPU kernels.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the versions, and which KernelBench L1/23-style tasks come from, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_eval(sub)
    p = sub.add_parser("backends", help="list backends and whether each is available here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_backends)
    for add in _subsystem_subparsers():
        add(sub)
    for name in TAKES_KERNELBENCH:
        add_kernelbench_flag(sub.choices[name])
    return parser


# Commands that never open an Optuna study: they start without importing optuna (half a second of a short command).
_WITHOUT_OPTUNA = frozenset({"eval", "backends", "kb", "llm-check", "prompt", "kernelbench"})


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command not in _WITHOUT_OPTUNA:
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)  # one-line errors stay one line
        with chosen_kernelbench(getattr(args, "kernelbench", None)):
            return int(args.func(args) or 0)
    except UsageError as e:
        print(f"evoforge: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evoforge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
