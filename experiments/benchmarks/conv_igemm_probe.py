"""How fast an implicit-GEMM convolution in Triton can be on a task's convolution (issues R and U), before any of it
goes into a seed: a 2-D convolution over channels-last (NHWC) input, its sizes constexprs (a main-shape build: rows aligned to the channel count, so the
loads vectorise), each program an output tile of BLOCK_M pixels
by BLOCK_N channels, its K loop one flat loop over the kernel's taps and channel blocks (so that Triton's pipeliner
overlaps the gathers with the dots), the weights as [KH, KW, C, K_out]; with FLAT_K the (tap, channel) pairs are
gathered element by element (few input channels: 3 or 8). Timed against cuDNN (channels-last TF32, the layout
torch.compile's static build gives it, and the reference's own NCHW call) at the task's shape, each config checked
against the float64 convolution (relative RMS).

    python3 -P experiments/benchmarks/conv_igemm_probe.py --tasks L2/1 L2/82 --out $OUT        # GPU
    python3 -P experiments/benchmarks/conv_igemm_probe.py --sample experiments/results/kernelbench/conv_family_sample_2026-12-03.json --out $OUT   # GPU: every form
    TRITON_INTERPRET=1 python3 experiments/benchmarks/conv_igemm_probe.py --check                  # CPU: correctness
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

import torch
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[2]


#: The kernel and its launcher as a seed carries them (``mutators/conv_kernel.py``), run here with the config given.
#: The probe's own copy of v1 and v2 (the rows of conv_igemm_2026-12-04_v1/v2.jsonl) is in git's history at 6e454e2
#: and 78fa06e; v2 is the kernel the seed carries.
_KERNEL: dict[str, Any] = {"torch": torch, "triton": triton, "tl": tl, "PARAMS": {}}


def conv2d_igemm(x: torch.Tensor, weight: torch.Tensor, stride: tuple[int, int], padding: tuple[int, int],
                 p: dict[str, Any]) -> torch.Tensor:
    """conv2d (no bias, no dilation, one group) as a seed's ``_evoforge_conv`` computes it with the config ``p``;
    the output is NCHW-shaped and laid out as cuDNN's (the flat gather below 16 channels is the launcher's choice)."""
    _ensure_kernel()
    _KERNEL["PARAMS"].update({f"p_{k}": v for k, v in p.items()})
    _KERNEL["PARAMS"].setdefault("p_GROUP_M", 8)
    return _KERNEL["_evoforge_conv"](x, weight, None, stride, padding, (1, 1), "p_")


def configs(c: int, precisions: list[str]) -> list[dict[str, Any]]:
    flat = c < 16
    tiles = [(128, 128, 32, 8, 3), (128, 128, 32, 4, 3), (128, 64, 32, 4, 4), (256, 128, 32, 8, 3),
             (128, 256, 32, 8, 3), (64, 128, 32, 4, 4), (128, 128, 64, 8, 3), (256, 64, 32, 8, 4)]
    out = []
    for prec in precisions:
        for bm, bn, bk, warps, stages in tiles:
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 16 if flat and bk > 16 else bk, "num_warps": warps,
                        "num_stages": stages, "PRECISION": prec})
    return out


def check() -> None:
    """On the interpreter: small odd convolutions (the flat gather below 16 channels, channel blocks above), against
    torch in float64."""
    torch.manual_seed(0)
    for (n, c, h, w, k, kh, s, pd) in [(2, 3, 9, 7, 5, 3, 1, 0), (1, 20, 8, 6, 6, 3, 2, 1), (2, 8, 5, 5, 4, 1, 1, 0)]:
        x = torch.randn(n, c, h, w)
        wt = torch.randn(k, c, kh, kh)
        ref = torch.nn.functional.conv2d(x.double(), wt.double(), stride=s, padding=pd)
        got = conv2d_igemm(x, wt, (s, s), (pd, pd), {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 1,
                                                      "num_stages": 1, "PRECISION": "ieee"})
        err = float((got.double() - ref).abs().max())
        print(f"N{n} C{c} {h}x{w} K{k} {kh}x{kh} s{s} p{pd}: max abs err {err:.1e}")
        assert err < 1e-3, err


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def family_configs(c: int, precisions: list[str]) -> list[dict[str, Any]]:
    """The seed's start (``TILES``' values) first, then three other tiles, in each precision."""
    from evoforge.mutators.conv_kernel import TILES

    start = {name: value for name, (_, value) in TILES.items()}
    tiles = [start, {**start, "BLOCK_M": 64, "BLOCK_N": 128}, {**start, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
             {**start, "BLOCK_M": 256, "num_warps": 8, "num_stages": 3}]
    return [{**t, "BLOCK_K": 16 if c < 16 else t["BLOCK_K"], "PRECISION": prec} for prec in precisions for t in tiles]


def probe(spec: str, precisions: list[str], deadline: float) -> dict[str, Any]:
    """Any convolution of the task (1-D, 2-D, 3-D; strided, padded, dilated, grouped, transposed): the seed's
    ``_evoforge_conv`` at a few configs against cuDNN as the reference calls it (TF32 allowed, PyTorch's default for
    convolutions), cuDNN in exact fp32, and for 2-D/3-D cuDNN channels-last in TF32 (torch.compile's layout); each
    output's relative RMS from the float64 convolution."""
    import copy

    import triton.testing

    calls = _load("conv_algos").conv_calls(spec, "cuda", 1)
    mod, x0 = calls[0]["module"], calls[0]["x"]
    torch.manual_seed(2)
    x = torch.randn_like(x0) * x0.float().std().clamp_min(1e-3)
    w = mod.weight.detach()
    bias = None if mod.bias is None else mod.bias.detach()
    transposed = "Transpose" in type(mod).__name__
    stride, padding, dilation = tuple(mod.stride), tuple(mod.padding), tuple(mod.dilation)
    output_padding = tuple(getattr(mod, "output_padding", (0,) * len(stride)))
    with torch.no_grad():
        ref64 = copy.deepcopy(mod).double()(x.double())

    def err(out: torch.Tensor) -> float:
        return float(((out.double() - ref64).norm() / ref64.norm()).item())

    cudnn = torch.backends.cudnn
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())

    def cudnn_call(xx: torch.Tensor, tf32: bool):
        def f():
            with torch.no_grad(), cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=tf32):
                return mod(xx)
        return f

    def bench(f) -> float:
        return float(triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median"))

    row: dict[str, Any] = {"spec": spec, "kind": type(mod).__name__, "x": list(x.shape), "weight": list(w.shape),
                           "stride": list(stride), "padding": list(padding), "dilation": list(dilation),
                           "groups": mod.groups, "output_padding": list(output_padding), "baselines": {}, "configs": []}
    baselines = {"cudnn_ref": cudnn_call(x, True), "cudnn_fp32": cudnn_call(x, False)}
    xl = x
    if fmt is not None:
        xl = x.contiguous(memory_format=fmt)
        baselines["cudnn_cl_tf32"] = cudnn_call(xl, True)
    for name, f in baselines.items():
        row["baselines"][name] = {"ms": bench(f), "err": err(f())}
    for p in family_configs(x.shape[1] // mod.groups, precisions):
        if time.perf_counter() > deadline:
            row["left"] = True
            break
        try:
            _ensure_kernel()
            _KERNEL["PARAMS"].update({f"p_{k}": v for k, v in p.items()})

            def run(p=p):
                return _KERNEL["_evoforge_conv"](xl, w, bias, stride, padding, dilation, "p_", transposed,
                                                 output_padding, mod.groups)

            forms = [True, False] if transposed and max(stride) > 1 else [True]
            for phased in forms:  # a transposed one split by output phase, and in the gather form alone
                _KERNEL["_EVOFORGE_CONV_PHASED"] = phased
                e = err(run())
                row["configs"].append({**p, "ms": bench(run), "err": e,
                                       **({"phased": phased} if len(forms) > 1 else {})})
            _KERNEL["_EVOFORGE_CONV_PHASED"] = True
        except Exception as ex:  # noqa: BLE001
            row["configs"].append({**p, "error": f"{type(ex).__name__}: {str(ex)[:200]}"})
    return row


def _ensure_kernel() -> None:
    global _KERNEL
    if "_evoforge_conv" not in _KERNEL:
        import tempfile

        from evoforge.mutators.conv_kernel import KERNEL_SOURCE

        # Triton's @jit reads a kernel's source back from its file: the seed's kernel is written to one and loaded.
        path = Path(tempfile.mkdtemp(prefix="conv_probe_")) / "evoforge_conv_kernel.py"
        path.write_text("import torch\nimport triton\nimport triton.language as tl\nPARAMS = {}\n" + KERNEL_SOURCE)
        spec = importlib.util.spec_from_file_location("evoforge_conv_kernel", path)
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        _KERNEL = vars(module)  # the kernel's globals: PARAMS and the phase toggle are read from here


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="*", default=[])
    ap.add_argument("--sample", type=Path, help="a committed task sample (JSON with tasks[].spec): its tasks")
    ap.add_argument("--precisions", nargs="*", default=["bf16x3", "tf32"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--deadline", type=float, default=400.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.check:
        check()
        return
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    specs = list(args.tasks) + ([t["spec"] for t in json.loads(args.sample.read_text())["tasks"]] if args.sample else [])
    for spec in specs:
        if time.perf_counter() > t0 + args.deadline:
            print(spec, "not probed: --deadline")
            continue
        try:
            row = probe(spec, args.precisions, t0 + args.deadline)
        except Exception as ex:  # noqa: BLE001  (a task that fails is a row, not the end of the run)
            row = {"spec": spec, "error": f"{type(ex).__name__}: {str(ex)[:300]}", "baselines": {}, "configs": []}
            print(spec, row["error"])
            with (args.out / "conv_igemm.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
            continue
        with (args.out / "conv_igemm.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        base = row["baselines"]["cudnn_ref"]["ms"]
        print(spec, row["x"], row["weight"], {k: (round(v["ms"], 3), f"{v['err']:.1e}") for k, v in row["baselines"].items()})
        for c in sorted((c for c in row["configs"] if "ms" in c), key=lambda c: (c["PRECISION"], c["ms"]))[:12]:
            form = {True: " phased", False: " gather"}.get(c.get("phased"), "")
            print(f"   {c['PRECISION']:7s}{form} {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} w{c['num_warps']} s{c['num_stages']}"
                  f" {c['ms']:.3f} ms ({base / c['ms']:.2f}x cuDNN as the reference calls it) err {c['err']:.1e}")
        for c in row["configs"]:
            if "error" in c:
                print("   error", c["PRECISION"], c["BLOCK_M"], c["BLOCK_N"], c["error"][:120])
                break
    meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"), "torch": torch.__version__,
            "triton": triton.__version__, "gpu": torch.cuda.get_device_name(0), "argv": sys.argv[1:],
            "script": "experiments/benchmarks/conv_igemm_probe.py", "cudnn": torch.backends.cudnn.version()}
    (args.out / "conv_igemm.meta.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
