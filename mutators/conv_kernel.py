"""A seed's convolutions as a Triton implicit GEMM of the candidate's own, in place of cuDNN's (issues R and U).

torch.compile's static build of a convolution task calls cuDNN for the convolution and fuses the rest around it. On
the H200 (experiments/results/kernelbench/conv_algos_2026-12-04.jsonl) cuDNN runs an fp32 convolution laid out
channels-last in TF32; on six of the 21 convolution tasks of the issue-R sample the reference's own (NCHW) call is
exact fp32, so that build fails the chain's float64 criterion (L2/82, L2/87) and the correct kernels fall back to
cuDNN's exact fp32 path, 1.9-3x slower. The kernel here computes the convolution from bf16 parts of its fp32
operands on tensor cores (``PRECISION`` bf16x3: about 4e-6 from float64, where TF32 is 3e-4): on L2/82's
convolution 1.75 ms against cuDNN's exact fp32 2.62 ms (NCHW) and 4.32 ms (channels-last), and 1.41 ms for its
TF32 (experiments/results/kernelbench/conv_igemm_2026-12-04_v2.jsonl). Where cuDNN's TF32 is the reference's own
arithmetic (64 input channels, L2/1) it stays 3x ahead of this kernel, which the search then leaves.

``with_triton_conv(source)`` rewrites a seed's main-shape path: each ``torch.convolution`` call there whose
arguments are literals (1-D, 2-D or 3-D; strided, padded, dilated, grouped or transposed) becomes a launch of
``_evoforge_conv``, with the kernel's tiles and precision in ``SPACE`` under ``convI_`` names; the shape-generic path
is left as it was. A task that is one convolution (Inductor writes no kernel for it) gets its build with cuDNN's
call so rewritten (``seed_from_capture(..., library_ok=True)``). The
output keeps the layout cuDNN's would have (channels-last for channels-last input, else contiguous), so the kernels
Inductor fused after the convolution read it as they did. The result is a variant (``triton-conv``) beside the seed:
the chain judges it, the search tunes it. With ``generic`` (the strict rule, where cuDNN is not allowed) the
shape-generic path's convolutions are rewritten too, at a fixed config, so that no vendor call is left.

Every convolution is computed as a 3-D one over channels-last (NDHWC) memory, a 2-D one with a depth of one and a
1-D one with a height of one too (the index arithmetic of the sizes of one folds away: they are constexprs). Each
program computes BLOCK_M output positions by BLOCK_N output channels; the K loop runs once over the kernel's taps
and channel blocks (one flat loop, so Triton's pipeliner overlaps the gathers with the dots), or, with fewer than 16
input channels, over (tap, channel) pairs gathered element by element. The sizes are constexprs: a main-shape build,
as the rest of the path is; rows then align to the channel count and the loads vectorise. Groups are the grid's
second axis (a group's GEMM over its own channels and weights; depthwise is groups = channels, one channel a K row).
A transposed convolution runs in gather form: each output position reads, per tap, the input position that tap
maps onto it, where there is one (``_evoforge_conv_at``), so no zero is ever inserted into memory. With a stride
above one its outputs are split by phase (the grid's third axis: the outputs ``r + S * j`` of each phase ``r`` along
each dimension), and each phase reads only the taps that map onto it (``k0 + ST * i``, ``_evoforge_phase_tap``), so
the work is the convolution's own: in the gather form alone a stride-2 3-D transposed convolution with a kernel of 4
ran every tap of every output, 8 times the multiply-adds, 7 of 8 of them masked (``_EVOFORGE_CONV_PHASED = False``
keeps that form, for comparison).
"""

from __future__ import annotations

import ast
import re
from typing import Any

#: The variant's name (``inductor_config`` in the record and its seed file's suffix).
TRITON_CONV = "triton-conv"
#: The precisions the kernel's dot may take: bf16 parts (three products) and three TF32 passes, each about fp32's
#: error; one TF32 pass (7.9e-4 from float64 on L2/1's convolution, where cuDNN's TF32 is 3.0e-4) and exact fp32 on
#: FMA units. ``tf32-round`` is one TF32 pass on operands first rounded to nearest at TF32's 11 significant bits
#: (``_evoforge_tf32_round``): the tensor cores read an fp32 operand's top 19 bits and drop the rest (a truncation,
#: biased, 2.6x cuDNN's error on L2/1), while cuDNN's TF32 rounds, so where cuDNN's TF32 is the reference's own
#: arithmetic (15 of the 21 convolution tasks of issue R's sample) this path computes what the reference computes
#: and the chain's float64 criterion (its yardstick the reference's own distance from float64) can admit it; where
#: the reference is exact fp32 it fails the chain as plain TF32 does. On a CPU (the interpreter) only ``ieee`` and
#: ``tf32-round`` compute what their names say.
PRECISIONS = ("bf16x3", "tf32x3", "tf32-round", "tf32", "ieee")
#: The value of ``PRECISION`` that rounds the operands to TF32 before a TF32 dot.
TF32_ROUND = "tf32-round"
#: The kernel's tuned values (each a SPACE entry ``convI_NAME``) and where they start: on the H200 128x64x32 with
#: 4 warps and 4 stages was within 20% of the best of eight tiles on both convolutions probed (64 and 8 input
#: channels), in bf16x3.
TILES: dict[str, tuple[list[int], int]] = {
    "BLOCK_M": ([64, 128, 256], 128), "BLOCK_N": ([32, 64, 128, 256], 64), "BLOCK_K": ([16, 32, 64], 32),
    "GROUP_M": ([1, 8], 8), "num_warps": ([4, 8], 4), "num_stages": ([2, 3, 4], 4)}
#: The direct stencil's tuned values (``convI_NAME``), for a convolution whose groups hold one input channel each
#: (depthwise): the output elements a program computes and its warps (an element-wise kernel's usual start).
DIRECT: dict[str, tuple[list[int], int]] = {"BLOCK": ([256, 512, 1024, 2048, 4096], 1024), "num_warps": ([2, 4, 8], 4)}

KERNEL_SOURCE = '''

@triton.jit
def _evoforge_tf32_round(v):
    """fp32 ``v`` rounded to nearest, ties to even, at TF32's 11 significant bits (the low 13 bits of the significand
    zero), as cuDNN's TF32 rounds its operands: a TF32 dot then reads them whole instead of dropping those bits."""
    bits = v.to(tl.int32, bitcast=True)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & -8192
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _evoforge_dot(a, b, acc, PRECISION: tl.constexpr):
    """acc + a @ b at the kernel's ``PRECISION`` (``tf32-round``: operands rounded to TF32, then one TF32 pass)."""
    if PRECISION == "tf32-round":
        return tl.dot(_evoforge_tf32_round(a), _evoforge_tf32_round(b), acc, input_precision="tf32")
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _evoforge_conv_at(o, k, S: tl.constexpr, P: tl.constexpr, DL: tl.constexpr, SIZE: tl.constexpr,
                      TRANSPOSED: tl.constexpr):
    """The input index that tap ``k`` of output index ``o`` reads along one dimension, and whether there is one: a
    convolution reads ``o * S - P + k * DL``; a transposed one the ``i`` with ``i * S - P + k * DL == o`` (its
    gather form: the taps of a stride's other phases read nothing)."""
    if TRANSPOSED:
        t = o + P - k * DL
        i = t // S
        ok = (t >= 0) & (i * S == t) & (i < SIZE)
    else:
        i = o * S - P + k * DL
        ok = (i >= 0) & (i < SIZE)
    return i, ok


@triton.jit
def _evoforge_phase_tap(r, S: tl.constexpr, P: tl.constexpr, DL: tl.constexpr, ST: tl.constexpr):
    """Along one dimension of a transposed convolution, the first tap that output phase ``r`` (outputs ``r + S * j``)
    reads, and whether there is one: the taps ``k`` with ``(r + P - k * DL) % S == 0``, which are ``k0 + ST * i``
    (``ST = S / gcd(DL, S)``), so at most one ``k0`` lies below ``ST``."""
    k0 = r * 0 + ST
    for c in tl.static_range(ST):
        k0 = tl.where((((r + P - c * DL) % S) == 0) & (k0 == ST), c, k0)
    return k0, k0 < ST


@triton.jit
def _evoforge_conv_ndhwc(x, w, bias, y, M, D: tl.constexpr, H: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
                         OD: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr, K_OUT: tl.constexpr,
                         SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
                         PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, KD: tl.constexpr,
                         KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr, FLAT_D: tl.constexpr,
                         FLAT_K: tl.constexpr, CG: tl.constexpr, KG: tl.constexpr, TRANSPOSED: tl.constexpr,
                         PHASED: tl.constexpr, QD: tl.constexpr, QH: tl.constexpr, QW: tl.constexpr,
                         TD: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr, STD: tl.constexpr, STH: tl.constexpr,
                         STW: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         PRECISION: tl.constexpr):
    """y[m, g * KG + j] = sum over taps and the group's CG channels c of x[n, id, ih, iw, g * CG + c] *
    w[g, kd, kh, kw, c, j], x and y channels-last (NDHWC; a 2-D convolution has D = KD = 1, a 1-D one H = KH = 1
    too); the group g is the grid's second axis. TRANSPOSED: the transposed convolution in gather form
    (``_evoforge_conv_at``). PHASED (transposed only): the outputs split by their phase along each dimension (the
    grid's third axis; a phase's outputs ``r + S * j``, ``j`` below ``Q``), each phase reading only its own taps
    (``k0 + ST * i``, ``i`` below ``T``), so a stride's other phases cost nothing. FLAT_D: a depth of one in and out,
    compiled without the depth's arithmetic; FLAT_K: (tap, channel) pairs gathered one by one."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(KG, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if PHASED:  # this program's phase (rd, rh, rw), its outputs r + S * j
        phase = tl.program_id(2)
        rw = phase % SW
        rh = (phase // SW) % SH
        rd = phase // (SW * SH)
        ow = rw + SW * (offs_m % QW)
        oh = rh + SH * ((offs_m // QW) % QH)
        if FLAT_D:
            n = offs_m // (QW * QH)
            od = 0
        else:
            n = offs_m // (QW * QH * QD)
            od = rd + SD * ((offs_m // (QW * QH)) % QD)
        in_m = (offs_m < M) & (ow < OW) & (oh < OH) & (od < OD)
        kw0, has_w = _evoforge_phase_tap(rw, SW, PW, DW, STW)
        kh0, has_h = _evoforge_phase_tap(rh, SH, PH, DH, STH)
        kd0, has_d = _evoforge_phase_tap(rd, SD, PD, DD, STD)
        has = has_w & has_h & has_d
        out_at = ((n * OD + od) * OH + oh) * OW + ow
    else:
        ow = offs_m % OW
        oh = (offs_m // OW) % OH
        if FLAT_D:
            n = offs_m // (OW * OH)
            od = 0
        else:
            n = offs_m // (OW * OH * OD)
            od = (offs_m // (OW * OH)) % OD
        in_m = offs_m < M
        out_at = offs_m
    in_n = offs_n < KG
    x += g * CG  # the group's first channel
    w += g * (KD * KH * KW * CG * KG)  # the group's weights: [KD, KH, KW, CG, KG]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT_K:
        KTOT: tl.constexpr = TD * TH * TW * CG if PHASED else KD * KH * KW * CG
        for k0 in range(0, KTOT, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            c = offs_k % CG
            t = offs_k // CG
            in_k = offs_k < KTOT
            if PHASED:  # the phase's own taps: k0 + ST * i along each dimension
                kw = kw0 + STW * (t % TW)
                kh = kh0 + STH * ((t // TW) % TH)
                kd = kd0 + STD * (t // (TW * TH))
                in_k = in_k & has & (kw < KW) & (kh < KH) & (kd < KD)
                tap = (kd * KH + kh) * KW + kw
            else:
                tap = t
                kw = tap % KW
                kh = (tap // KW) % KH
                kd = tap // (KH * KW)
            ih, ok_h = _evoforge_conv_at(oh[:, None], kh[None, :], SH, PH, DH, H, TRANSPOSED)
            iw, ok_w = _evoforge_conv_at(ow[:, None], kw[None, :], SW, PW, DW, W, TRANSPOSED)
            ok = in_m[:, None] & in_k[None, :] & ok_h & ok_w
            if FLAT_D:
                at = (n[:, None] * H + ih) * W + iw
            else:
                i_d, ok_d = _evoforge_conv_at(od[:, None], kd[None, :], SD, PD, DD, D, TRANSPOSED)
                ok = ok & ok_d
                at = ((n[:, None] * D + i_d) * H + ih) * W + iw
            a = tl.load(x + at * C + c[None, :], mask=ok, other=0.0)
            b = tl.load(w + (tap * CG + c)[:, None] * KG + offs_n[None, :], mask=in_k[:, None] & in_n[None, :],
                        other=0.0)
            acc = _evoforge_dot(a, b, acc, PRECISION)
    else:
        CB: tl.constexpr = (CG + BLOCK_K - 1) // BLOCK_K
        for kk in range(0, (TD * TH * TW if PHASED else KD * KH * KW) * CB):
            t = kk // CB
            if PHASED:  # the phase's own taps: k0 + ST * i along each dimension
                kw = kw0 + STW * (t % TW)
                kh = kh0 + STH * ((t // TW) % TH)
                kd = kd0 + STD * (t // (TW * TH))
                in_t = has & (kw < KW) & (kh < KH) & (kd < KD)
                tap = (kd * KH + kh) * KW + kw
            else:
                tap = t
                kw = tap % KW
                kh = (tap // KW) % KH
                kd = tap // (KH * KW)
                in_t = kk >= 0  # every tap
            ih, ok_h = _evoforge_conv_at(oh, kh, SH, PH, DH, H, TRANSPOSED)
            iw, ok_w = _evoforge_conv_at(ow, kw, SW, PW, DW, W, TRANSPOSED)
            offs_k = (kk % CB) * BLOCK_K + tl.arange(0, BLOCK_K)
            ok_m = in_m & ok_h & ok_w & in_t
            if FLAT_D:
                rows = ((n * H + ih) * W + iw) * C
            else:
                i_d, ok_d = _evoforge_conv_at(od, kd, SD, PD, DD, D, TRANSPOSED)
                ok_m = ok_m & ok_d
                rows = (((n * D + i_d) * H + ih) * W + iw) * C
            if CG % BLOCK_K == 0:  # whole channel blocks: no mask along K, so the loads vectorise
                a = tl.load(x + rows[:, None] + offs_k[None, :], mask=ok_m[:, None], other=0.0)
                b = tl.load(w + (tap * CG + offs_k)[:, None] * KG + offs_n[None, :], mask=in_n[None, :] & in_t,
                            other=0.0)
            else:
                a = tl.load(x + rows[:, None] + offs_k[None, :], mask=ok_m[:, None] & (offs_k < CG)[None, :],
                            other=0.0)
                b = tl.load(w + (tap * CG + offs_k)[:, None] * KG + offs_n[None, :],
                            mask=(offs_k < CG)[:, None] & in_n[None, :] & in_t, other=0.0)
            acc = _evoforge_dot(a, b, acc, PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias + g * KG + offs_n, mask=in_n, other=0.0)[None, :]
    tl.store(y + out_at[:, None] * K_OUT + g * KG + offs_n[None, :], acc, mask=in_m[:, None] & in_n[None, :])


@triton.jit
def _evoforge_conv_direct(x, w, bias, y, D: tl.constexpr, H: tl.constexpr, W: tl.constexpr, K_OUT: tl.constexpr,
                          OD: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr, XN: tl.constexpr, XC: tl.constexpr,
                          XD: tl.constexpr, XH: tl.constexpr, XW: tl.constexpr, YN: tl.constexpr, YC: tl.constexpr,
                          YD: tl.constexpr, YH: tl.constexpr, YW: tl.constexpr,
                          SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
                          PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, KD: tl.constexpr,
                          KH: tl.constexpr, KW: tl.constexpr, CG: tl.constexpr, KG: tl.constexpr,
                          HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """The direct stencil: y[n, o, p] = sum over the group's CG channels c and the taps of
    x[n, g * CG + c, p's window] * w[o, c, tap] (+ bias[o]), in fp32 FMAs, x and y in their own layouts (``X*``,
    ``Y*``: their strides along n, c, d, h and w, in elements). A program computes BLOCK_P output positions of one sample
    by BLOCK_C output channels: for contiguous (NCDHW) memory BLOCK_C is 1 and a warp's loads of a tap are
    consecutive addresses of an input row; for channels-last memory they run along the channels. The taps are
    unrolled. For a depthwise convolution (CG = 1), where the implicit GEMM's tile would hold one output channel of a
    group."""
    P: tl.constexpr = OD * OH * OW
    p_blocks: tl.constexpr = (P + BLOCK_P - 1) // BLOCK_P
    c_blocks: tl.constexpr = (K_OUT + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    n = (pid // (p_blocks * c_blocks)).to(tl.int64)
    offs_p = (pid % p_blocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    o = ((pid // p_blocks) % c_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    in_p = offs_p < P
    in_o = o < K_OUT
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    od = offs_p // (OW * OH)
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for c in range(CG):
        xc = x + n * XN + ((o // KG) * CG + c)[None, :] * XC
        wc = w + (o * CG + c) * (KD * KH * KW)
        for kd in tl.static_range(KD):
            i_d = od * SD - PD + kd * DD
            ok_d = in_p & (i_d >= 0) & (i_d < D)
            for kh in tl.static_range(KH):
                ih = oh * SH - PH + kh * DH
                ok_h = ok_d & (ih >= 0) & (ih < H)
                for kw in tl.static_range(KW):
                    iw = ow * SW - PW + kw * DW
                    ok = ok_h & (iw >= 0) & (iw < W)
                    v = tl.load(xc + (i_d * XD + ih * XH + iw * XW)[:, None],
                                mask=ok[:, None] & in_o[None, :], other=0.0)
                    tap = tl.load(wc + (kd * KH + kh) * KW + kw, mask=in_o, other=0.0)
                    acc += v.to(tl.float32) * tap.to(tl.float32)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias + o, mask=in_o, other=0.0).to(tl.float32)[None, :]
    at = n * YN + (od * YD + oh * YH + ow * YW)[:, None] + o[None, :] * YC
    tl.store(y + at, acc, mask=in_p[:, None] & in_o[None, :])


def _evoforge_conv(x, weight, bias, stride, padding, dilation, prefix, transposed=False, output_padding=(0,),
                   groups=1):
    """torch.convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups) (1-D, 2-D
    or 3-D), computed by _evoforge_conv_ndhwc with the PARAMS under ``prefix`` (None: the shape-generic path's fixed
    config); the output laid out as cuDNN lays it out (channels-last for channels-last input, else contiguous)."""
    dims = x.dim() - 2
    lead = 3 - dims  # sizes of one put in front: every convolution is a 3-D one here
    x5 = x.reshape(x.shape[0], x.shape[1], *([1] * lead), *x.shape[2:]) if lead else x
    w5 = weight.reshape(*weight.shape[:2], *([1] * lead), *weight.shape[2:]) if lead else weight
    output_padding = tuple(output_padding) * (dims if len(tuple(output_padding)) == 1 else 1)
    stride, padding, dilation, output_padding = ((fill,) * lead + tuple(v) for fill, v in (
        (1, stride), (0, padding), (1, dilation), (0, output_padding)))
    n, c, d, h, wd = x5.shape
    if not transposed:  # a weight [K_out, C / groups, ...]: the groups follow the operands at any shape (the
        groups = c // w5.shape[1]  # shape-generic path's literal is the capture's: a depthwise task's odd shape)
    cg = c // groups
    _, _, kd, kh, kw = w5.shape
    if transposed:  # weight [C, KG, ...]: each group's CG input channels to its KG outputs
        kg = w5.shape[1]
        wt = w5.reshape(groups, cg, kg, kd, kh, kw).permute(0, 3, 4, 5, 1, 2)
        out = tuple((size - 1) * s - 2 * p + dl * (k - 1) + op + 1 for size, p, dl, k, s, op in
                    zip((d, h, wd), padding, dilation, (kd, kh, kw), stride, output_padding, strict=True))
    else:  # weight [K_out, CG, ...]
        kg = w5.shape[0] // groups
        wt = w5.reshape(groups, kg, cg, kd, kh, kw).permute(0, 3, 4, 5, 2, 1)
        out = tuple((size + 2 * p - dl * (k - 1) - 1) // s + 1 for size, p, dl, k, s in
                    zip((d, h, wd), padding, dilation, (kd, kh, kw), stride, strict=True))
    od, oh, ow = out
    k_out = kg * groups
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    channels_last = fmt is not None and x.is_contiguous(memory_format=fmt) and not x.is_contiguous()
    # The direct stencil where the build chose it (a depthwise convolution: ``DIRECT``'s values under the prefix), and
    # on the shape-generic path wherever a group holds one input channel; in the input's own layout.
    if not transposed and (prefix is not None and prefix + "BLOCK" in PARAMS or prefix is None and cg == 1):
        p = _EVOFORGE_CONV_DIRECT_ANY if prefix is None else {name: PARAMS[prefix + name] for name in ("BLOCK",
                                                                                                      "num_warps")}
        if channels_last:  # the output as cuDNN lays it out; a tile's channels side by side in memory
            y5 = torch.empty((n, od, oh, ow, k_out), device=x.device, dtype=x.dtype).permute(0, 4, 1, 2, 3)
            block_c = min(triton.next_power_of_2(k_out), 32, p["BLOCK"])
        else:
            y5 = torch.empty((n, k_out, od, oh, ow), device=x.device, dtype=x.dtype)
            block_c = 1
        block_p = p["BLOCK"] // block_c
        grid = n * triton.cdiv(od * oh * ow, block_p) * triton.cdiv(k_out, block_c)
        _evoforge_conv_direct[(grid,)](x5, w5.contiguous(), w5 if bias is None else bias, y5, d, h, wd, k_out, od, oh,
                                       ow, *x5.stride(), *y5.stride(), *stride, *padding, *dilation, KD=kd,
                                       KH=kh, KW=kw, CG=cg, KG=kg, HAS_BIAS=bias is not None, BLOCK_P=block_p,
                                       BLOCK_C=block_c, num_warps=p["num_warps"])
        return y5.view(n, k_out, *(od, oh, ow)[lead:])  # the sizes of one put in front dropped: a view
    xl = x5.permute(0, 2, 3, 4, 1).contiguous()  # NDHWC (no copy where x is channels-last already)
    wt = wt.contiguous()  # [G, KD, KH, KW, CG, KG]: a K row of a group's GEMM is one (tap, channel)
    y = torch.empty((n, od, oh, ow, k_out), device=x.device, dtype=x.dtype)
    phased = bool(transposed) and _EVOFORGE_CONV_PHASED and max(stride) > 1
    if phased:  # per dimension: a phase's outputs (q), the step between its taps (st) and their count (t)
        q = tuple(triton.cdiv(o, s) for o, s in zip(out, stride, strict=True))
        st = tuple(s // _evoforge_gcd(dl, s) for s, dl in zip(stride, dilation, strict=True))
        t = tuple(triton.cdiv(k, step) for k, step in zip((kd, kh, kw), st, strict=True))
    else:
        q, st, t = out, (1, 1, 1), (kd, kh, kw)
    m = n * q[0] * q[1] * q[2]
    names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages", "PRECISION")
    p = _EVOFORGE_CONV_ANY if prefix is None else {name: PARAMS[prefix + name] for name in names}
    grid = (triton.cdiv(m, p["BLOCK_M"]) * triton.cdiv(kg, p["BLOCK_N"]), groups,
            stride[0] * stride[1] * stride[2] if phased else 1)
    _evoforge_conv_ndhwc[grid](xl, wt, wt if bias is None else bias, y, m, d, h, wd, c, od, oh, ow, k_out, *stride,
                               *padding, *dilation, KD=kd, KH=kh, KW=kw, HAS_BIAS=bias is not None,
                               FLAT_D=d == 1 and od == 1 and kd == 1 and padding[0] == 0, FLAT_K=cg < 16, CG=cg,
                               KG=kg, TRANSPOSED=bool(transposed), PHASED=phased, QD=q[0], QH=q[1], QW=q[2],
                               TD=t[0], TH=t[1], TW=t[2], STD=st[0], STH=st[1], STW=st[2],
                               BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], GROUP_M=p["GROUP_M"],
                               PRECISION=p["PRECISION"], num_warps=p["num_warps"], num_stages=p["num_stages"])
    out = y.permute(0, 4, 1, 2, 3).reshape(n, k_out, *(od, oh, ow)[lead:])  # a view: NDHWC memory, NC... shape
    return out if channels_last else out.contiguous()


def _evoforge_gcd(a, b):
    while b:
        a, b = b, a % b
    return a


#: The direct stencil's config on the shape-generic path (a group of one input channel there).
_EVOFORGE_CONV_DIRECT_ANY = {"BLOCK": 1024, "num_warps": 4}
#: A transposed convolution's outputs split by phase, each reading its own taps (False: the gather form alone, every
#: tap of every output, those of a stride's other phases masked).
_EVOFORGE_CONV_PHASED = True
'''


def _ints(node: ast.expr | None) -> tuple[int, ...] | None:
    """A literal tuple or list of one to three ints."""
    if isinstance(node, ast.Tuple | ast.List) and 1 <= len(node.elts) <= 3 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, int) for e in node.elts):
        return tuple(e.value for e in node.elts)  # type: ignore[union-attr]
    return None


#: ``torch.convolution``'s arguments after (input, weight), in order (the ATen op's positional form).
_CONV_ARGS = ("bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
_CONV_CALLS = ("torch.convolution", "torch.ops.aten.convolution.default")


def _plain_conv(call: ast.Call) -> tuple[str, ...] | None:
    """The arguments of a convolution call the kernel computes, as source text (x, weight, bias, stride, padding,
    dilation, transposed, output_padding, groups): 1-D, 2-D or 3-D, strided, padded, dilated, grouped or transposed,
    every one of them a literal, in the keyword form of a main-shape path or the ATen op's positional one; else
    None."""
    if ast.unparse(call.func) not in _CONV_CALLS or len(call.args) < 2 or len(call.args) > 2 + len(_CONV_ARGS):
        return None
    kw: dict[str, ast.expr | None] = dict(zip(_CONV_ARGS, call.args[2:], strict=False))
    kw.update({k.arg: k.value for k in call.keywords if k.arg})
    bias = kw.get("bias")
    stride, padding, dilation = _ints(kw.get("stride")), _ints(kw.get("padding")), _ints(kw.get("dilation"))
    output_padding, transposed, groups = _ints(kw.get("output_padding")), kw.get("transposed"), kw.get("groups")
    literal = (stride and padding and dilation and output_padding
               and len({len(stride), len(padding), len(dilation), len(output_padding)}) == 1
               and isinstance(transposed, ast.Constant) and isinstance(transposed.value, bool)
               and isinstance(groups, ast.Constant) and isinstance(groups.value, int) and groups.value >= 1
               and not (any(output_padding) and transposed.value is False))
    if not literal:
        return None
    none = bias is None or (isinstance(bias, ast.Constant) and bias.value is None)
    return (ast.unparse(call.args[0]), ast.unparse(call.args[1]), "None" if none else ast.unparse(bias),
            repr(stride), repr(padding), repr(dilation), repr(transposed.value), repr(output_padding),  # type: ignore[union-attr]
            repr(groups.value))  # type: ignore[union-attr]


def _literal_line(source: str, name: str) -> tuple[re.Match[str], dict[str, Any]] | None:
    m = re.search(rf"^{name} = (\{{.*\}})$", source, re.MULTILINE)
    return (m, ast.literal_eval(m.group(1))) if m else None


def _weight_shape(fn: ast.FunctionDef, name: str, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The shape of the tensor ``name`` holds in a main-shape path: a model attribute's (``argN_1 = self.conv.weight``,
    its shape in ``shapes``) or a buffer's (``bufN = torch.empty_strided((sizes), ...)``); None where neither says."""
    for node in fn.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name):
            continue
        allocated = _empty_strided(node.value)
        return allocated[0] if allocated else shapes.get(ast.unparse(node.value))
    return None


def _empty_strided(value: ast.expr) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(sizes, strides) of a ``torch.empty_strided((sizes), (strides), ...)`` with literal sizes and strides."""
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "torch.empty_strided" and len(value.args) >= 2):
        return None
    try:
        return tuple(ast.literal_eval(value.args[0])), tuple(ast.literal_eval(value.args[1]))
    except (ValueError, TypeError):
        return None


#: The Triton calls a pure copy makes: its load and store, its index, and masks that are all true where the sizes are
#: constants (Inductor's static build on a GPU writes ``xmask = tl.full([XBLOCK], True, tl.int1)[None, :]``; on the
#: H100, L1/82's copies kept their 2 x 4 GiB passes for want of this).
_COPY_CALLS = ("tl.load", "tl.store", "tl.program_id", "tl.arange", "tl.full")


def _pure_copy(tree: ast.Module, kernel: str) -> bool:
    """Whether the module's kernel ``kernel`` stores what it loads, unchanged, once: a copy of its first pointer's
    tensor into its second's, in another layout (Inductor's layout change before and after a convolution)."""
    # Inductor names a kernel by the ATen ops it fuses: a copy that only serves a convolution's layout fuses the
    # convolution alone; one that also flips, rolls or transposes what it copies (one load, one store too) names them.
    if not re.fullmatch(r"triton_\w+?_fused_convolution_\d+(_main)?", kernel):
        return False
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if fn is None or len(fn.args.args) < 2:
        return False
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    loads = [c for c in calls if ast.unparse(c.func) == "tl.load"]
    stores = [c for c in calls if ast.unparse(c.func) == "tl.store"]
    if len(loads) != 1 or len(stores) != 1 or len(stores[0].args) < 2:
        return False
    held = [n for n in fn.body if isinstance(n, ast.Assign) and n.value is loads[0]
            and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    first, second = fn.args.args[0].arg, fn.args.args[1].arg
    return (len(held) == 1 and ast.unparse(stores[0].args[1]) == held[0].targets[0].id  # type: ignore[union-attr]
            and ast.unparse(loads[0].args[0]).startswith(first) and ast.unparse(stores[0].args[0]).startswith(second)
            and not any(isinstance(c.func, ast.Attribute) and ast.unparse(c.func).startswith(("tl.", "libdevice."))
                        and ast.unparse(c.func) not in _COPY_CALLS for c in calls))


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= size
    return tuple(reversed(out))


def _skip_layout_copies(source: str, prefixes: list[str]) -> str:
    """A direct-stencil convolution reads and writes memory in any layout, so Inductor's copies around it (its input
    into channels-last before, its channels-last output into the contiguous result after; each two passes over the
    whole tensor, where a depthwise convolution itself makes about two) go: where the main path's convolution under
    ``prefix`` reads a buffer only a pure copy (``_pure_copy``) of another tensor filled, and only a pure copy into a
    contiguous buffer reads its result, it reads that tensor and its result is that buffer (made contiguous, a no-op
    on contiguous input). The copies' launch values leave SPACE. Anything else: the source as it was."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    main = next((n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef)
                 and n.name == "forward_main_shape"), None)
    if main is None:
        return source
    lines = source.splitlines(keepends=True)
    body = main.body

    def names_in(stmt: ast.stmt) -> list[str]:
        return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)]

    def launch(stmt: ast.stmt) -> tuple[str, list[str]] | None:
        """(kernel, its first two arguments' names) of a launch statement ``k[grid](a, b, ...)``."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Subscript) and isinstance(stmt.value.func.value, ast.Name)):
            return None
        args = stmt.value.args
        if len(args) < 2 or not all(isinstance(a, ast.Name) for a in args[:2]):
            return None
        return stmt.value.func.value.id, [a.id for a in args[:2]]  # type: ignore[union-attr]

    def allocation(stmt: ast.stmt, name: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == name):
            return None
        return _empty_strided(stmt.value)

    drop: set[int] = set()
    replace: dict[int, str] = {}
    for k, stmt in enumerate(body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) == "_evoforge_conv"
                and len(stmt.value.args) >= 7 and isinstance(stmt.value.args[0], ast.Name)
                and isinstance(stmt.value.args[6], ast.Constant) and stmt.value.args[6].value in prefixes):
            continue
        conv_in, conv_out = stmt.value.args[0].id, stmt.targets[0].id
        uses_in = [j for j, t in enumerate(body) if conv_in in names_in(t)]
        uses_out = [j for j, t in enumerate(body) if conv_out in names_in(t)]
        fill = [j for j in uses_in if (lc := launch(body[j])) and lc[1][1] == conv_in]
        read = [j for j in uses_out if j > k and (lc := launch(body[j])) and lc[1][0] == conv_out]
        if len(fill) != 1 or len(read) != 1:
            continue
        (kin, (src, _)), (kout, (_, result)) = launch(body[fill[0]]), launch(body[read[0]])  # type: ignore[misc]
        alloc_in = [j for j in uses_in if allocation(body[j], conv_in)]
        alloc_out = [j for j, t in enumerate(body) if allocation(t, result)]
        del_in = [j for j in uses_in if isinstance(body[j], ast.Delete)]
        del_out = [j for j in uses_out if isinstance(body[j], ast.Delete)]
        if (not _pure_copy(tree, kin) or not _pure_copy(tree, kout) or len(alloc_in) != 1 or len(alloc_out) != 1
                or set(uses_in) != {*fill, *alloc_in, k, *del_in} or set(uses_out) - {k, *read, *del_out}):
            continue
        shape, strides = allocation(body[alloc_out[0]], result)  # type: ignore[misc]
        if strides != _contiguous_strides(shape):
            continue
        if any(b.lineno != b.end_lineno for b in (body[j] for j in (k, fill[0], read[0]))):
            continue
        drop.update([fill[0], *alloc_in, *del_in, alloc_out[0]])
        drop.update(j for j, t in enumerate(body) if j < k and isinstance(t, ast.Delete) and src in names_in(t))
        line = lines[stmt.lineno - 1]
        replace[stmt.lineno - 1] = line.replace(f"_evoforge_conv({conv_in},", f"_evoforge_conv({src},", 1)
        indent = line[:len(line) - len(line.lstrip())]
        replace[body[read[0]].lineno - 1] = f"{indent}{result} = {conv_out}.contiguous()\n"
    if not replace:
        return source
    for j in drop:
        for ln in range(body[j].lineno - 1, body[j].end_lineno or body[j].lineno):
            replace[ln] = ""
    gone = {key for ln in replace for key in re.findall(r"PARAMS\[['\"](\w+)['\"]\]", lines[ln])}
    out = "".join(replace.get(i, line) for i, line in enumerate(lines))
    space, params = _literal_line(out, "SPACE"), _literal_line(out, "PARAMS")
    if space is None or params is None:
        return source
    rest = out.replace(space[0].group(0), "").replace(params[0].group(0), "")
    keep = {key for key in space[1] if key not in gone or f"'{key}'" in rest or f'"{key}"' in rest}
    return out.replace(space[0].group(0), f"SPACE = { {k: v for k, v in space[1].items() if k in keep}!r}", 1).replace(
        params[0].group(0), f"PARAMS = { {k: v for k, v in params[1].items() if k in keep}!r}", 1)


def with_triton_conv(source: str, *, start_precision: str = "bf16x3", generic: bool = False,
                     weight_shapes: dict[str, tuple[int, ...]] | None = None) -> str | None:
    """The seed with every plain convolution of its main-shape path computed by the kernel above (its tiles and
    precision in SPACE, starting at ``TILES``' values and ``start_precision``); with ``generic``, those of its
    shape-generic path too (at a fixed config in ``start_precision``: the search tunes the main path), so that no
    vendor convolution is left where every one is plain. A convolution whose weight holds one input channel a group
    (depthwise; its shape from ``weight_shapes``, the model's tensors by their expression in the path, or from the
    buffer's allocation) gets the direct stencil instead, ``DIRECT``'s values in SPACE. None where the seed has no
    main-shape path, no such convolution there, or (``generic``) a convolution the kernel does not compute."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    paths = {n.name: n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef)}
    main = paths.get("forward_main_shape")
    space, params = _literal_line(source, "SPACE"), _literal_line(source, "PARAMS")
    if main is None or space is None or params is None or "_evoforge_conv(" in source:
        return None
    lines = source.splitlines(keepends=True)

    def convs_of(fn: ast.FunctionDef) -> tuple[list[ast.Call], int]:
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) in _CONV_CALLS]
        plain = sorted((c for c in calls if _plain_conv(c)), key=lambda c: (c.lineno, c.col_offset))
        return plain, len(calls) - len(plain)

    def rewrite(call: ast.Call, prefix: str | None) -> bool:
        if call.lineno != call.end_lineno:
            return False
        x, w, bias, stride, padding, dilation, transposed, output_padding, groups = _plain_conv(call)  # type: ignore[misc]
        line = lines[call.lineno - 1]
        segment = line[call.col_offset:call.end_col_offset]
        lines[call.lineno - 1] = line.replace(segment, f"_evoforge_conv({x}, {w}, {bias}, {stride}, {padding}, "
                                              f"{dilation}, {prefix!r}, {transposed}, {output_padding}, {groups})", 1)
        return True

    convs, unplain = convs_of(main)
    if not convs or len({c.lineno for c in convs}) < len(convs):  # Inductor writes one call a line
        return None
    new_space, new_params = dict(space[1]), dict(params[1])
    for i, call in enumerate(convs):
        prefix = f"conv{i}_"
        args = _plain_conv(call)
        assert args is not None
        shape = _weight_shape(main, args[1], weight_shapes or {})
        if not rewrite(call, prefix):
            return None
        if args[6] == "False" and shape is not None and len(shape) >= 3 and shape[1] == 1:  # depthwise
            for name, (values, start) in DIRECT.items():
                new_space[prefix + name], new_params[prefix + name] = list(values), start
            continue
        for name, (values, start) in TILES.items():
            new_space[prefix + name], new_params[prefix + name] = list(values), start
        new_space[prefix + "PRECISION"] = list(PRECISIONS)
        new_params[prefix + "PRECISION"] = start_precision
    if generic:
        any_shape = paths.get("forward_any_shape")
        others, unplain_any = convs_of(any_shape) if any_shape is not None else ([], 0)
        if unplain or unplain_any or len({c.lineno for c in others}) < len(others) or not all(
                rewrite(call, None) for call in others):
            return None
    out = "".join(lines)
    out = out.replace(space[0].group(0), f"SPACE = {new_space!r}", 1).replace(
        params[0].group(0), f"PARAMS = {new_params!r}", 1)
    direct = [f"conv{i}_" for i in range(len(convs)) if f"conv{i}_BLOCK" in new_space]
    if direct:
        out = _skip_layout_copies(out, direct)
    anchor = re.search(r"^class (TaskModel|ModelNew)\b", out, re.MULTILINE)
    assert anchor is not None
    fixed = {name: start for name, (_, start) in TILES.items()} | {"PRECISION": start_precision}
    kernel = KERNEL_SOURCE.lstrip("\n") + f"\n\n#: The shape-generic path's config (the search tunes the main path's).\n" \
        f"_EVOFORGE_CONV_ANY = {fixed!r}\n"
    return out[:anchor.start()] + kernel + "\n\n" + out[anchor.start():]
