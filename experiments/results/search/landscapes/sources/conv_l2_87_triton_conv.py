"""Seed from torch.compile for /work/main/.kb/level2/87_Conv2d_Subtract_Subtract_Mish.py: Inductor's Triton (torch 2.11.0+cu130, cuda) as plain kernels.

Made by evoforge (inductor-seed); each kernel's block sizes and warps are PARAMS entries, Inductor's choice the default.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language import math as tl_math
from triton.language.extra import libdevice

import torch.nn.functional as F  # noqa: F401  (the task's Model may use it)

SPACE = {'k0_XBLOCK': [8, 16, 32, 64, 128], 'k0_YBLOCK': [8, 16, 32, 64, 128], 'k0_num_warps': [1, 2, 4, 8, 16], 'k0_num_stages': [1, 2, 3, 4, 5], 'k1_XBLOCK': [4, 8, 16, 32, 64], 'k1_YBLOCK': [16, 32, 64, 128, 256], 'k1_num_warps': [1, 2, 4, 8, 16], 'k1_num_stages': [1, 2, 3, 4, 5], 'k2_XBLOCK': [4, 8, 16, 32, 64], 'k2_YBLOCK': [64, 128, 256, 512, 1024], 'k2_num_warps': [1, 2, 4, 8, 16], 'k2_num_stages': [1, 2, 3, 4, 5], 'conv0_BLOCK_M': [64, 128, 256], 'conv0_BLOCK_N': [32, 64, 128, 256], 'conv0_BLOCK_K': [16, 32, 64], 'conv0_GROUP_M': [1, 8], 'conv0_num_warps': [4, 8], 'conv0_num_stages': [2, 3, 4], 'conv0_PRECISION': ['bf16x3', 'tf32x3', 'tf32-round', 'tf32', 'ieee']}
PARAMS = {'k0_XBLOCK': 32, 'k0_YBLOCK': 32, 'k0_num_warps': 4, 'k0_num_stages': 1, 'k1_XBLOCK': 16, 'k1_YBLOCK': 64, 'k1_num_warps': 4, 'k1_num_stages': 1, 'k2_XBLOCK': 16, 'k2_YBLOCK': 256, 'k2_num_warps': 8, 'k2_num_stages': 1, 'conv0_BLOCK_M': 128, 'conv0_BLOCK_N': 64, 'conv0_BLOCK_K': 32, 'conv0_GROUP_M': 8, 'conv0_num_warps': 4, 'conv0_num_stages': 4, 'conv0_PRECISION': 'bf16x3'}

# The task's main shape (the one timed): its init inputs. forward_main_shape's kernels were compiled for it.
MAIN_SHAPE_INIT = [8, 64, 3, 0.5, 0.2]


def _plain(value):
    """Init inputs as JSON would keep them (tuples as lists), to compare with MAIN_SHAPE_INIT."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def yz_overflow_grid(x_grid, y_grid, max_y=65535):
    """Inductor's Grid2DWithYZOverflow: a y grid past the device's limit spills into z."""
    div = triton.cdiv(y_grid, max_y)
    return (x_grid, 0 if div == 0 else triton.cdiv(y_grid, div), div)


if os.environ.get("TRITON_INTERPRET", "0") == "1":  # the interpreter has no libdevice on the CPU

    @triton.jit
    def _interpreted_exp(x):
        return tl.exp(x)

    @triton.jit
    def _interpreted_log1p(x):
        return tl.log(1.0 + x)

    @triton.jit
    def _interpreted_tanh(x):
        e = tl.exp(-2.0 * tl.abs(x))
        t = (1.0 - e) / (1.0 + e)
        return tl.where(x < 0, -t, t)

    class libdevice:  # noqa: N801  (tl.math in libdevice's names)
        exp = _interpreted_exp
        log1p = _interpreted_log1p
        tanh = _interpreted_tanh


@triton.jit
def triton_poi_fused_convolution_0_main(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 1024
    xnumel = 65536
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = tl.full([XBLOCK], True, tl.int1)[None, :]
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 8)
    y1 = yindex // 8
    tmp0 = tl.load(in_ptr0 + (x2 + 65536*y3), None, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 8*x2 + 524288*y1), tmp0, None)


@triton.jit
def triton_poi_fused_convolution_1_main(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 512
    xnumel = 9
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 8)
    y1 = yindex // 8
    tmp0 = tl.load(in_ptr0 + (x2 + 9*y3), xmask & ymask, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 8*x2 + 72*y1), tmp0, xmask & ymask)


@triton.jit
def triton_poi_fused_convolution_mish_sub_2_main(in_ptr0, in_ptr1, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 8258048
    xnumel = 64
    yoffset = (tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 64516)
    y1 = yindex // 64516
    tmp0 = tl.load(in_ptr0 + (x2 + 64*y3), xmask & ymask, eviction_policy='evict_last')
    tmp1 = tl.load(in_ptr1 + (x2), xmask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1, 1], 0.5, tl.float32)
    tmp4 = tmp2 - tmp3
    tmp5 = tl.full([1, 1], 0.2, tl.float32)
    tmp6 = tmp4 - tmp5
    tmp7 = tl.full([1, 1], 20.0, tl.float32)
    tmp8 = tmp6 > tmp7
    tmp9 = libdevice.exp(tmp6)
    tmp10 = libdevice.log1p(tmp9)
    tmp11 = tl.where(tmp8, tmp6, tmp10)
    tmp12 = libdevice.tanh(tmp11)
    tmp13 = tmp6 * tmp12
    tl.store(out_ptr0 + (y0 + 64516*x2 + 4129024*y1), tmp13, xmask & ymask)


@triton.jit
def triton_poi_fused_mish_0(in_out_ptr0, in_ptr0, in_ptr1, ks0, ks1, ks2, ks3, ks4, ks5, ks6, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = (xindex % ks0)
    x1 = ((xindex // ks0) % ks1)
    x2 = xindex // ks2
    tmp0 = tl.load(in_out_ptr0 + (x0 + x1*((1) * ((1) >= (1 + ks3 + ((-1)*ks4))) + (1 + ks3 + ((-1)*ks4)) * ((1 + ks3 + ((-1)*ks4)) > (1))) + x2*((1) * ((1) >= (1 + ks3 + ((-1)*ks4))) + (1 + ks3 + ((-1)*ks4)) * ((1 + ks3 + ((-1)*ks4)) > (1)))*((1) * ((1) >= (1 + ks5 + ((-1)*ks6))) + (1 + ks5 + ((-1)*ks6)) * ((1 + ks5 + ((-1)*ks6)) > (1)))), xmask, eviction_policy='evict_last')
    tmp1 = in_ptr0
    tmp4 = in_ptr1
    tmp7 = tl.load(in_out_ptr0 + (x0 + x1*((1) * ((1) >= (ks0)) + (ks0) * ((ks0) > (1))) + x2*((1) * ((1) >= (ks0)) + (ks0) * ((ks0) > (1)))*((1) * ((1) >= (ks1)) + (ks1) * ((ks1) > (1)))), xmask, eviction_policy='evict_last')
    tmp2 = tmp1.to(tl.float32)
    tmp3 = tmp0 - tmp2
    tmp5 = tmp4.to(tl.float32)
    tmp6 = tmp3 - tmp5
    tmp8 = tmp7 - tmp2
    tmp9 = tmp8 - tmp5
    tmp10 = tl.full([1], 20.0, tl.float32)
    tmp11 = tmp9 > tmp10
    tmp12 = libdevice.exp(tmp9)
    tmp13 = libdevice.log1p(tmp12)
    tmp14 = tl.where(tmp11, tmp9, tmp13)
    tmp15 = libdevice.tanh(tmp14)
    tmp16 = tmp6 * tmp15
    tl.store(in_out_ptr0 + (x0 + x1*((1) * ((1) >= (ks0)) + (ks0) * ((ks0) > (1))) + x2*((1) * ((1) >= (ks0)) + (ks0) * ((ks0) > (1)))*((1) * ((1) >= (ks1)) + (ks1) * ((ks1) > (1)))), tmp16, xmask)


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


#: The shape-generic path's config (the search tunes the main path's).
_EVOFORGE_CONV_ANY = {'BLOCK_M': 128, 'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8, 'num_warps': 4, 'num_stages': 4, 'PRECISION': 'bf16x3'}


class TaskModel(nn.Module):
    """
    Model that performs a convolution, subtracts two values, applies Mish activation.
    """

    def __init__(self, in_channels, out_channels, kernel_size, subtract_value_1, subtract_value_2):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value_1 = subtract_value_1
        self.subtract_value_2 = subtract_value_2


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # The task's Model makes the parameters (its forward removed): same names, shapes and init.
        made = TaskModel(*args, **kwargs)
        for name, child in made.named_children():
            setattr(self, name, child)
        for name, p in made.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in made.named_buffers(recurse=False):
            self.register_buffer(name, b)
        for name, value in vars(made).items():  # plain attributes the forward reads (a multiplier)
            if not name.startswith('_') and name != 'training':
                setattr(self, name, value)
        # The main shape's kernels serve a model made with the main shape's init inputs (a guard, as
        # torch.compile's static build has one per shape); every other model, the generic ones.
        self._main_shape = _plain(args) == MAIN_SHAPE_INIT and not kwargs
        self._main_state = None  # its parameters' sizes, strides and dtypes, checked at the first call

    def forward(self, x):
        if self._main_shape and self._main_state is None:
            self._main_state = bool(self.conv.weight.shape == (64, 8, 3, 3) and self.conv.weight.stride() == (72, 9, 3, 1) and self.conv.weight.dtype == torch.float32 and self.conv.bias.shape == (64,) and self.conv.bias.stride() == (1,) and self.conv.bias.dtype == torch.float32)
        if self._main_shape and self._main_state and x.shape == (128, 8, 256, 256) and x.stride() == (524288, 65536, 256, 1) and x.dtype == torch.float32:
            return self.forward_main_shape(x)
        return self.forward_any_shape(x)

    def forward_main_shape(self, x):
        device_ = x.device
        arg0_1 = self.conv.weight
        arg1_1 = self.conv.bias
        arg2_1 = x
        buf0 = torch.empty_strided((128, 8, 256, 256), (524288, 1, 2048, 8), dtype=torch.float32, device=device_)
        triton_poi_fused_convolution_0_main[triton.cdiv(65536, PARAMS['k0_XBLOCK']), triton.cdiv(1024, PARAMS['k0_YBLOCK'])](arg2_1, buf0, 1024, 65536, XBLOCK=PARAMS['k0_XBLOCK'], YBLOCK=PARAMS['k0_YBLOCK'], num_warps=PARAMS['k0_num_warps'], num_stages=PARAMS['k0_num_stages'])
        del arg2_1
        buf1 = torch.empty_strided((64, 8, 3, 3), (72, 1, 24, 8), dtype=torch.float32, device=device_)
        triton_poi_fused_convolution_1_main[triton.cdiv(9, PARAMS['k1_XBLOCK']), triton.cdiv(512, PARAMS['k1_YBLOCK'])](arg0_1, buf1, 512, 9, XBLOCK=PARAMS['k1_XBLOCK'], YBLOCK=PARAMS['k1_YBLOCK'], num_warps=PARAMS['k1_num_warps'], num_stages=PARAMS['k1_num_stages'])
        del arg0_1
        buf2 = _evoforge_conv(buf0, buf1, None, (1, 1), (0, 0), (1, 1), 'conv0_', False, (0, 0), 1)
        del buf0
        del buf1
        buf3 = torch.empty_strided((128, 64, 254, 254), (4129024, 64516, 254, 1), dtype=torch.float32, device=device_)
        triton_poi_fused_convolution_mish_sub_2_main[yz_overflow_grid(triton.cdiv(64, PARAMS['k2_XBLOCK']), triton.cdiv(8258048, PARAMS['k2_YBLOCK']))](buf2, arg1_1, buf3, 8258048, 64, XBLOCK=PARAMS['k2_XBLOCK'], YBLOCK=PARAMS['k2_YBLOCK'], num_warps=PARAMS['k2_num_warps'], num_stages=PARAMS['k2_num_stages'])
        del arg1_1
        del buf2
        return buf3

    def forward_any_shape(self, x):
        device_ = x.device
        arg0_1 = self.conv.weight.size()[0]
        arg1_1 = self.conv.weight.size()[1]
        arg2_1 = self.conv.weight.size()[2]
        arg3_1 = self.conv.weight.size()[3]
        arg4_1 = self.conv.weight
        arg5_1 = self.conv.bias
        arg6_1 = x.size()[0]
        arg7_1 = x.size()[2]
        arg8_1 = x.size()[3]
        arg9_1 = x
        arg10_1 = torch.as_tensor(self.subtract_value_1)
        arg11_1 = torch.as_tensor(self.subtract_value_2)
        s65 = arg0_1
        s83 = arg1_1
        s98 = arg2_1
        s50 = arg3_1
        s77 = arg6_1
        s53 = arg7_1
        s0 = arg8_1
        arg4_1_size = arg4_1.size()
        s51 = arg4_1_size[0]
        s27 = arg4_1_size[1]
        buf0 = _evoforge_conv(arg9_1, arg4_1, arg5_1, (1, 1), (0, 0), (1, 1), None, False, (0, 0), 1)
        del arg4_1
        del arg5_1
        del arg9_1
        buf1 = buf0
        del buf0
        ps0 = 1 + s0 + -1 * s50
        ps1 = 1 + s53 + -1 * s98
        ps2 = 1 + s0 + s53 + -1 * s50 + -1 * s98 + s0 * s53 + s50 * s98 + -1 * s0 * s98 + -1 * s50 * s53
        buf2 = buf1
        del buf1
        triton_poi_fused_mish_0_xnumel = s51 * s77 + s0 * s51 * s77 + s51 * s53 * s77 + -1 * s50 * s51 * s77 + -1 * s51 * s77 * s98 + s0 * s51 * s53 * s77 + s50 * s51 * s77 * s98 + -1 * s0 * s51 * s77 * s98 + -1 * s50 * s51 * s53 * s77
        triton_poi_fused_mish_0[triton.cdiv(triton_poi_fused_mish_0_xnumel, 1024),](buf2, arg10_1.item(), arg11_1.item(), ps0, ps1, ps2, s0, s50, s53, s98, triton_poi_fused_mish_0_xnumel, XBLOCK=1024, num_warps=4, num_stages=1)
        del arg10_1
        del arg11_1
        return buf2
