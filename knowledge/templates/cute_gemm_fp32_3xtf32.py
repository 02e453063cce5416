"""CuTe seed: C = A @ B in fp32 on tensor cores with a split-precision (3xTF32) product (KernelBench L1/1).

A TF32 tensor-core product keeps 10 mantissa bits of each operand: 0.29 max abs error at 4096^3 on the H200,
rightly rejected for an fp32 task. Splitting each operand x into a TF32 ``big`` part and a TF32 residual
``small = tf32(x - big)`` and accumulating ``small_a*big_b + big_a*small_b + big_a*big_b`` in fp32 recovers
about 21 bits per operand: closer to a float64 reference than PyTorch's own fp32 GEMM, which is the chain's
criterion for fp32 (at most 2x the reference's own distance from float64).

Structure: each 256-thread CTA computes a BM x BN tile of C with a CuTe TiledMMA of SM80 TF32 atoms
(``SM80_16x8x8_F32TF32TF32F32_TN``, 2 x 4 warps); per BK slice of K the operand tiles go global -> registers
(the next slice is loaded while the current one is multiplied) -> padded shared memory, laid out so that the
copies store and the MMA partitions read without bank conflicts; the split happens in registers, per k-block.
Edges are predicated with identity tensors (zero fill), so any M, N, K works. ``PROMOTE`` (default 1) sums
each BK slice into a fresh tensor-core partial and adds it to the running sum on the CUDA cores: with one chained
tensor-core accumulator (``PROMOTE=0``) the H200 run of 2026-12-01 (experiments/results/cute/h200.md) was
incorrect, over twice the fp32 reference's rms distance from float64; the promoted form is not yet measured. The atoms are SM80's (mma.sync),
which Hopper runs too: this is the correct starting point; TMA + wgmma (tf32 is K-major only there) and a
deeper pipeline are what the search adds.
"""

import torch
import torch.nn as nn
from evoforge.backends.cute import load

LANGUAGE = "cute"

CUDA_SRC = r"""
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/numeric_conversion.h>
#include <cutlass/tfloat32.h>
#include <cstdint>
using namespace cute;

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef SPLIT
#define SPLIT 3
#endif
#ifndef PROMOTE
#define PROMOTE 1
#endif

// A (M,K):(K,1) K-major; B seen as (N,K):(1,N) N-major; C (M,N):(N,1).
template <int kBM, int kBN, int kBK>
__global__ void __launch_bounds__(256)
gemm_3xtf32_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
  static_assert(kBM % 32 == 0 && kBN % 64 == 0 && kBK % 32 == 0, "tiles must fit the copy and MMA layouts");
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(int64_t(K), Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(Int<1>{}, int64_t(N)));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), Int<1>{}));
  Tensor cA = make_identity_tensor(shape(mA));
  Tensor cB = make_identity_tensor(shape(mB));
  Tensor cC = make_identity_tensor(shape(mC));

  auto tiler = make_shape(Int<kBM>{}, Int<kBN>{}, Int<kBK>{});
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA  = local_tile(mA, tiler, coord, Step<_1,  X, _1>{});   // (BM,BK,k_tiles)
  Tensor gB  = local_tile(mB, tiler, coord, Step< X, _1, _1>{});   // (BN,BK,k_tiles)
  Tensor gC  = local_tile(mC, tiler, coord, Step<_1, _1,  X>{});   // (BM,BN)
  Tensor gcA = local_tile(cA, tiler, coord, Step<_1,  X, _1>{});
  Tensor gcB = local_tile(cB, tiler, coord, Step< X, _1, _1>{});
  Tensor gcC = local_tile(cC, tiler, coord, Step<_1, _1,  X>{});

  // sA K-major with a row pitch of BK+4 floats, sB N-major with a pitch of BN+8: the copies store along the
  // contiguous mode and the MMA's (row = lane/4, k = lane%4) reads hit 32 distinct banks.
  __shared__ float smemA[kBM * (kBK + 4)];
  __shared__ float smemB[kBK * (kBN + 8)];
  Tensor sA = make_tensor(make_smem_ptr(smemA),
                          make_layout(make_shape(Int<kBM>{}, Int<kBK>{}), make_stride(Int<kBK + 4>{}, Int<1>{})));
  Tensor sB = make_tensor(make_smem_ptr(smemB),
                          make_layout(make_shape(Int<kBN>{}, Int<kBK>{}), make_stride(Int<1>{}, Int<kBN + 8>{})));

  // Copy partitions: 32 threads along A's K (128 contiguous bytes), 32 along B's N.
  auto tA = make_layout(make_shape(Int<8>{}, Int<32>{}), LayoutRight{});   // (8,32):(32,1)
  auto tB = make_layout(make_shape(Int<32>{}, Int<8>{}));                  // (32,8):(1,32)
  Tensor tAgA = local_partition(gA, tA, threadIdx.x);     // (BM/8, BK/32, k_tiles)
  Tensor tAcA = local_partition(gcA, tA, threadIdx.x);
  Tensor tAsA = local_partition(sA, tA, threadIdx.x);     // (BM/8, BK/32)
  Tensor tBgB = local_partition(gB, tB, threadIdx.x);     // (BN/32, BK/8, k_tiles)
  Tensor tBcB = local_partition(gcB, tB, threadIdx.x);
  Tensor tBsB = local_partition(sB, tB, threadIdx.x);
  Tensor tArA = make_fragment_like(tAsA);                 // the next slice, in flight in registers
  Tensor tBrB = make_fragment_like(tBsB);

  // 8 warps as 2 (M) x 4 (N) of 16x8x8 TF32 atoms; each warp's N doubled: a 32x64 tile per MMA step.
  TiledMMA mma = make_tiled_mma(MMA_Atom<SM80_16x8x8_F32TF32TF32F32_TN>{}, Layout<Shape<_2, _4, _1>>{},
                                Tile<_32, _64, _8>{});
  ThrMMA thr = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);                      // (MMA,MMA_M,MMA_K)
  Tensor tCsB = thr.partition_B(sB);                      // (MMA,MMA_N,MMA_K)
  Tensor tCgC = thr.partition_C(gC);                      // (MMA,MMA_M,MMA_N)
  Tensor tCcC = thr.partition_C(gcC);
  Tensor tCrC = thr.make_fragment_C(tCgC);
  clear(tCrC);
#if PROMOTE
  // Each BK slice is summed on the tensor cores into a fresh partial, then added to the running sum by the CUDA
  // cores (fp32, round to nearest): the MMA's own accumulation is not IEEE fp32, and 3 x K/8 of them chained into
  // one accumulator put the H200's result at over twice the fp32 reference's distance from float64.
  Tensor tCrP = thr.make_fragment_C(tCgC);
  auto& acc = tCrP;
#else
  auto& acc = tCrC;
#endif
  // one k-block of operands in TF32 registers: (MMA,MMA_M) and (MMA,MMA_N)
  Tensor aBig = make_tensor<cutlass::tfloat32_t>(shape(tCsA(_, _, 0)));
  Tensor aSmall = make_tensor<cutlass::tfloat32_t>(shape(tCsA(_, _, 0)));
  Tensor bBig = make_tensor<cutlass::tfloat32_t>(shape(tCsB(_, _, 0)));
  Tensor bSmall = make_tensor<cutlass::tfloat32_t>(shape(tCsB(_, _, 0)));
  cutlass::NumericConverter<cutlass::tfloat32_t, float, cutlass::FloatRoundStyle::round_to_nearest> to_tf32;

  auto load_slice = [&](int kt) {
    CUTE_UNROLL
    for (int i = 0; i < size(tArA); ++i) {
      tArA(i) = elem_less(tAcA(_, _, kt)(i), shape(mA)) ? tAgA(_, _, kt)(i) : 0.f;
    }
    CUTE_UNROLL
    for (int i = 0; i < size(tBrB); ++i) {
      tBrB(i) = elem_less(tBcB(_, _, kt)(i), shape(mB)) ? tBgB(_, _, kt)(i) : 0.f;
    }
  };

  int k_tiles = size<2>(gA);
  if (k_tiles > 0) load_slice(0);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy(tArA, tAsA);
    copy(tBrB, tBsB);
    __syncthreads();
    if (kt + 1 < k_tiles) load_slice(kt + 1);   // global loads in flight while the tensor cores work
#if PROMOTE
    clear(tCrP);
#endif
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCsA); ++kb) {
      CUTE_UNROLL
      for (int i = 0; i < size(aBig); ++i) {
        float x = tCsA(_, _, kb)(i);
        aBig(i) = to_tf32(x);
        aSmall(i) = to_tf32(x - float(aBig(i)));
      }
      CUTE_UNROLL
      for (int i = 0; i < size(bBig); ++i) {
        float x = tCsB(_, _, kb)(i);
        bBig(i) = to_tf32(x);
        bSmall(i) = to_tf32(x - float(bBig(i)));
      }
#if SPLIT >= 3
      gemm(mma, aSmall, bBig, acc);             // the small cross terms first: they are the ones fp32 rounds
      gemm(mma, aBig, bSmall, acc);
#endif
      gemm(mma, aBig, bBig, acc);
    }
#if PROMOTE
    CUTE_UNROLL
    for (int i = 0; i < size(tCrC); ++i) {
      tCrC(i) += tCrP(i);
    }
#endif
    __syncthreads();
  }

  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) {
    if (elem_less(tCcC(i), shape(mC))) {
      tCgC(i) = tCrC(i);
    }
  }
}

extern "C" cudaError_t gemm_forward(const float* A, const float* B, float* C, int M, int N, int K,
                                    cudaStream_t stream) {
  if (M == 0 || N == 0) return cudaSuccess;
  dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);
  gemm_3xtf32_kernel<BM, BN, BK><<<grid, dim3(256), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError();
}
"""

SPACE = {"BM": [64, 128], "BN": [64, 128], "BK": [32], "PROMOTE": [1, 0]}
PARAMS = {"BM": 128, "BN": 128, "BK": 32, "PROMOTE": 1}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"expected A (M,K) and B (K,N), got {tuple(A.shape)} and {tuple(B.shape)}")
        if A.dtype != torch.float32 or B.dtype != torch.float32:
            raise TypeError(f"this kernel is written for float32, got {A.dtype} and {B.dtype}")
        lib = load(CUDA_SRC, params=PARAMS)
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        lib.gemm_forward(A, B, C, M, N, K, None)
        return C
