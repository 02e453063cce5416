"""Export the best kernel of a task as a standalone module, never slower than its seed or the reference."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evoforge.core import Candidate, EvalResult, declared_space, params_lines
from evoforge.task import Task


def bake_params(source: str, params: dict[str, Any]) -> str:
    """Replace the module's ``PARAMS = {...}`` literal with the tuned values, so the file stands alone."""
    span = params_lines(source) if params else None
    if span is None:
        return source
    start, end = span
    merged = {**declared_space(source)[1], **params}
    lines = source.splitlines(keepends=True)
    return "".join(lines[:start - 1]) + f"PARAMS = {merged!r}\n" + "".join(lines[end:])


#: A kernel this close to torch.compile's build (its speed over it at least this) is on par with it, not slower: two
#: timings of one kernel in separate evaluations spread about as much on the H200.
ON_PAR = 0.98
#: Below ON_PAR but above this, a comparison of one timing each is within what separate evaluations of identical code
#: read on the H200 (L1/37: 0.943x in a campaign whose --confirm had no time left, 1.001x re-timed in another process;
#: memory-bound and convolution tasks 4-10% with the allocator's state): the export says it was not re-timed.
UNCONFIRMED_SPREAD = 0.90


def task_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def export_best(run_dir: Path, task: Task, best: tuple[Candidate, EvalResult] | None, seed: Candidate,
                seed_result: EvalResult | None, *, compile_speedup: float | None = None) -> dict[str, Any]:
    """Write ``RUN_DIR/best/<task>.py`` and ``.json``.

    The exported kernel is the fastest correct one, the seed included, so it is never slower than the seed.
    When even that is slower than the PyTorch reference, the export says so: keep the reference. When it is
    slower than torch.compile's build of the reference (``compile_speedup``: torch.compile's speedup over the
    reference, timed as the kernels were), it says that: use torch.compile.
    """
    out_dir = run_dir / "best"
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = task_slug(task.name)
    info: dict[str, Any] = {"task": task.name}
    if best is None:
        info.update(recommendation="reference", reason="no correct kernel was found; keep the PyTorch reference")
        (out_dir / f"{slug}.json").write_text(json.dumps(info, indent=2))
        return info
    candidate, result = best
    beats_reference = result.speedup is not None and result.speedup > 1.0
    info.update(candidate_id=candidate.id, operator=candidate.operator, language=candidate.language,
                params=candidate.params,
                speedup=result.speedup, runtime_ms=result.runtime_ms, ref_ms=result.ref_ms,
                pct_of_floor=result.pct_of_floor, timing_representative=result.timing_representative,
                seed_speedup=seed_result.speedup if seed_result and seed_result.ok else None,
                recommendation="kernel" if beats_reference else "reference")
    if result.details.get("confirmed"):  # re-timed as a finalist (evoforge/confirm.py)
        info.update(confirmed=True, search_speedup=result.details.get("search_speedup"))
    vs_compile = result.speedup / compile_speedup if result.speedup and compile_speedup else None
    info.update(compile_speedup=compile_speedup, vs_compile=vs_compile)
    if not beats_reference:
        info["reason"] = (f"the fastest correct kernel runs at {result.speedup:.3g}x the PyTorch reference: "
                          "keep the reference")
    if vs_compile is not None and ON_PAR <= vs_compile < 1.0:
        info["note"] = (f"on par with torch.compile's build of the reference ({vs_compile:.3g}x: within "
                        f"{100 * (1 - ON_PAR):.0f}%, the spread of two timings)")
    if vs_compile is not None and vs_compile < ON_PAR and compile_speedup is not None and compile_speedup > 1.0:
        info["recommendation"] = "torch.compile"
        info["reason"] = (f"the fastest correct kernel runs at {vs_compile:.3g}x torch.compile's build of the "
                          f"reference ({result.speedup:.3g}x the reference, torch.compile {compile_speedup:.3g}x): "
                          "use torch.compile(model)")
        if vs_compile >= UNCONFIRMED_SPREAD and not result.details.get("confirmed"):
            info["reason"] += (" (one timing of each, not re-timed: identical code has read up to "
                               f"{100 * (1 - UNCONFIRMED_SPREAD):.0f}% apart between evaluations on the H200; "
                               "--confirm with time left for it re-times the finalists and the build)")
    if not result.timing_representative:
        info["note"] = "timed on the Triton interpreter: the speedup says nothing about a GPU"
    header = (f"# evoforge: best kernel for {task.name}\n"
              f"# speedup {result.speedup:.4g}x over the PyTorch reference "
              f"({result.runtime_ms:.4g} ms vs {result.ref_ms:.4g} ms on {result.backend}, {result.arch})\n"
              + (f"# {vs_compile:.4g}x torch.compile's build of the reference\n" if vs_compile is not None else "")
              + ("" if beats_reference else "# NOT faster than the reference: keep the reference.\n")
              + ("# NOT faster than torch.compile: use torch.compile(model).\n"
                 if info["recommendation"] == "torch.compile" else "")
              + ("# timed on the Triton interpreter: not representative of a GPU\n"
                 if not result.timing_representative else "")
              + ("# language: CuTe (CUDA C++ in CUDA_SRC, built with nvcc when first loaded; PARAMS are its "
                 "-D macros)\n" if candidate.language == "cute" else "")
              + f"# candidate {candidate.id}, operator {candidate.operator}, params {candidate.params}\n")
    (out_dir / f"{slug}.py").write_text(header + bake_params(candidate.source, candidate.params))
    info["file"] = str(out_dir / f"{slug}.py")
    (out_dir / f"{slug}.json").write_text(json.dumps(info, indent=2, default=str))
    return info
