"""What cuDNN's own choices are worth on a task's convolutions (issue R): each convolution of a KernelBench
reference, at the task's main shape, timed and checked under cuDNN's settings that torch.compile leaves at their
defaults: the algorithm picked by cuDNN's heuristic or by timing every algorithm (``torch.backends.cudnn.benchmark``),
TF32 allowed or not (PyTorch allows it for convolutions by default), in the layout as given and channels-last (the
layout Inductor's static build gives a 2-D convolution).

Each convolution's arguments are read off the reference as it runs (a forward hook on every ``nn.Conv*``), its inputs
drawn again signed (``randn`` at the task's scale), and each setting's output compared with the float64 convolution
(relative RMS: TF32 lands near 3e-4, fp32 near 1e-7). Timing: the coverage script's (half a second of all in turn,
then mirrored do_bench medians, L2 flushed; ``--placements N``: the median over N allocator states).

    python3 -P experiments/benchmarks/conv_algos.py --tasks L2/1 L2/31 ... --out $OUT          # GPU
    python3 experiments/benchmarks/conv_algos.py --tasks L2/1 --out /tmp/ca --smoke             # CPU: the wiring only
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def conv_calls(spec: str, device: str, limit: int = 2, overrides: dict | None = None) -> list[dict[str, Any]]:
    """The reference's convolutions at the main shape: module, weight, bias and the input each one saw."""
    import torch
    from torch import nn

    from evoforge.task import Task, load_task_module

    tm = load_task_module(Task.load(spec, overrides=overrides or None))
    torch.manual_seed(0)
    model = tm.Model(*tm.get_init_inputs()).to(device)
    seen: list[dict[str, Any]] = []

    def hook(module: nn.Module, args: tuple, _out: Any) -> None:
        if len(seen) < limit:
            seen.append({"module": module, "x": args[0].detach()})

    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, kinds)]
    torch.manual_seed(1)
    with torch.no_grad(), torch.device(device):
        model(*[x.to(device) if isinstance(x, torch.Tensor) else x for x in tm.get_inputs()])
    for h in handles:
        h.remove()
    return seen


def describe(module: Any, x: Any) -> dict[str, Any]:
    w = module.weight
    return {"kind": type(module).__name__, "x": list(x.shape), "weight": list(w.shape), "stride": list(module.stride),
            "padding": list(module.padding) if not isinstance(module.padding, str) else module.padding,
            "dilation": list(module.dilation), "groups": module.groups}


def settings_for(module: Any, x: Any) -> dict[str, dict[str, Any]]:
    """Named settings: layout, benchmark, allow_tf32."""
    out = {}
    layouts = ["given"]
    if x.dim() in (4, 5):
        layouts.append("channels_last")
    for layout in layouts:
        for bench in (False, True):
            for tf32 in (True, False):
                out[f"{layout}/{'bench' if bench else 'heur'}/{'tf32' if tf32 else 'fp32'}"] = {
                    "layout": layout, "benchmark": bench, "allow_tf32": tf32}
    return out


def run_one(module: Any, x: Any, settings: dict[str, Any], placements: int, device: str) -> dict[str, Any]:
    import torch

    cudnn = torch.backends.cudnn
    torch.manual_seed(2)
    xs = torch.randn_like(x) * x.float().std().clamp_min(1e-3)
    with torch.no_grad():
        ref64 = module.double()(xs.double())
        module.float()
        fns, errors = {}, {}
        for name, s in settings.items():
            fmt = (torch.channels_last if x.dim() == 4 else torch.channels_last_3d) if s["layout"] != "given" else None
            mod = module if fmt is None else _as_layout(module, fmt)
            inp = xs if fmt is None else xs.contiguous(memory_format=fmt)

            def call(mod=mod, inp=inp, s=s):
                with cudnn.flags(enabled=True, benchmark=s["benchmark"], deterministic=False,
                                 allow_tf32=s["allow_tf32"]):
                    return mod(inp)

            got = call().double()
            errors[name] = float(((got - ref64).norm() / ref64.norm().clamp_min(1e-30)).item())
            fns[name] = call
        if device != "cuda":
            return {"errors": errors}
        times = _load("kernelbench_coverage")._bench_together(fns, placements)
    return {"errors": errors, "ms": times}


def _as_layout(module: Any, fmt: Any) -> Any:
    import copy

    m = copy.deepcopy(module)
    m.weight.data = m.weight.data.contiguous(memory_format=fmt)
    return m


#: Whole-task builds (``--builds``): torch.compile's default, and Inductor's Triton convolution template
#: (max-autotune with Triton as the only convolution backend, the epilogue fused) with its dot in each precision.
#: Inductor writes the template's dot ``allow_tf32=ALLOW_TF32`` from ``torch.backends.cudnn.fp32_precision``, which is
#: "none" by default (while cuDNN's own convolutions may take TF32): the template then runs exact fp32 on FMA units.
BUILDS = {"compile": None, "tpl-tf32": 'input_precision="tf32"', "tpl-tf32x3": 'input_precision="tf32x3"',
          "tpl-bf16x3": 'input_precision="bf16x3"', "tpl-ieee": 'input_precision="ieee"'}


def build_task(spec: str, names: list[str], device: str, deadline: float) -> dict[str, Any]:
    """Eager, torch.compile and the template builds of one task at its main shape: relative RMS error of each
    against the float64 reference (signed inputs), the reference's own, compile seconds, and times."""
    import copy

    import torch
    import torch._inductor.kernel.conv  # noqa: F401  (its templates registered)
    from evoforge.mutators.inductor_capture import _RenderedAs
    from torch._inductor.select_algorithm import TritonTemplate

    from evoforge.task import Task, load_task_module

    tm = load_task_module(Task.load(spec))
    torch.manual_seed(0)
    model = tm.Model(*tm.get_init_inputs()).to(device).eval()
    torch.manual_seed(1)
    with torch.device(device):
        made = tm.get_inputs()
    inputs = [(x * 2 - 1 if x.min() >= 0 else x).to(device) if isinstance(x, torch.Tensor) else x for x in made]
    with torch.no_grad():
        ref64 = copy.deepcopy(model).double()(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs])

        def err(out: Any) -> float:
            return float(((out.double() - ref64).norm() / ref64.norm().clamp_min(1e-30)).item())

        row: dict[str, Any] = {"spec": spec, "errors": {"eager": err(model(*inputs))}, "compile_s": {}}
        fns: dict[str, Any] = {"eager": lambda: model(*inputs)}
        for name in names:
            if time.perf_counter() > deadline:
                row.setdefault("left", []).append(name)
                continue
            torch._dynamo.reset()
            dot = BUILDS[name]
            templates = list(TritonTemplate.all_templates.values()) if dot else []
            for t in templates:
                t.template = _RenderedAs(t.template, dot)
            try:
                options = ({"max_autotune": True, "max_autotune_conv_backends": "TRITON", "fx_graph_cache": False}
                           if dot else {})
                compiled = torch.compile(copy.deepcopy(model), options=options or None)
                t0 = time.perf_counter()
                out = compiled(*inputs)
                row["compile_s"][name] = round(time.perf_counter() - t0, 1)
                row["errors"][name] = err(out)
                fns[name] = lambda c=compiled: c(*inputs)
            except Exception as e:  # noqa: BLE001
                row.setdefault("build_errors", {})[name] = f"{type(e).__name__}: {str(e)[:300]}"
            finally:
                for t in templates:
                    t.template = t.template.inner
        if device == "cuda":
            row["ms"] = _load("kernelbench_coverage")._bench_together(fns, 0)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--placements", type=int, default=0)
    ap.add_argument("--per-task", type=int, default=2, help="convolutions of each task measured (the first N)")
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds; tasks past it are left")
    ap.add_argument("--smoke", action="store_true", help="on the CPU: the wiring, nothing timed")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: a module constant (small sizes for --smoke)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--builds", nargs="*", help=f"whole-task builds to time instead ({', '.join(BUILDS)})")
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    rows = args.out / "conv_algos.jsonl"
    t0 = time.perf_counter()
    if args.builds:
        for spec in args.tasks:
            try:
                row = build_task(spec, args.builds, device, t0 + args.deadline)
            except Exception as e:  # noqa: BLE001
                row = {"spec": spec, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            with (args.out / "conv_builds.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
            ms = row.get("ms") or {}
            print(spec, {k: (round(v, 4), round(ms["compile"] / v, 3) if "compile" in ms else None,
                             f"{row['errors'].get(k, float('nan')):.1e}") for k, v in ms.items()},
                  row.get("compile_s"), row.get("build_errors") or row.get("error") or "", flush=True)
            torch.cuda.empty_cache() if device == "cuda" else None
        args.tasks = []
    for spec in args.tasks:
        if time.perf_counter() - t0 > args.deadline:
            print(f"{spec}: left, past the deadline", flush=True)
            continue
        try:
            calls = conv_calls(spec, device, args.per_task, {k: json.loads(v) for k, v in (a.split("=", 1) for a in args.set)})
        except Exception as e:  # noqa: BLE001  (recorded; the other tasks go on)
            calls, err = [], f"{type(e).__name__}: {str(e)[:200]}"
        else:
            err = ""
        for i, c in enumerate(calls):
            row = {"spec": spec, "conv": i, **describe(c["module"], c["x"])}
            try:
                row.update(run_one(c["module"], c["x"], settings_for(c["module"], c["x"]), args.placements, device))
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            with rows.open("a") as f:
                f.write(json.dumps(row) + "\n")
            ms = row.get("ms") or {}
            base = ms.get("given/heur/tf32")
            print(spec, i, row.get("kind"), row.get("x"), {k: (round(v, 4), round(base / v, 3) if base else None,
                                                            f"{row['errors'][k]:.1e}") for k, v in ms.items()}
                  if ms else row.get("errors") or row.get("error"), flush=True)
            torch.cuda.empty_cache() if device == "cuda" else None
        if err:
            with rows.open("a") as f:
                f.write(json.dumps({"spec": spec, "error": err}) + "\n")
    suite = _load("h200_suite")
    meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "driver": suite._driver() if device == "cuda" else "", "commit": _load("kernelbench_coverage")._commit(),
            "script": "experiments/benchmarks/conv_algos.py", "argv": sys.argv[1:]}
    (args.out / "conv_algos.meta.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
