"""CuTe seed: C = A @ B in fp32 (KernelBench L1/1, square matmul; any M, N, K).

The CuTe tutorial's structure (sgemm_1), with predication so no size has to be a multiple of a tile:
each block computes a BM x BN tile of C; per BK slice of K, 256 threads copy A and B tiles from global to
shared memory (zero-filling what lies past M, N or K), then each thread accumulates a (BM/16) x (BN/16)
register tile with fp32 FMAs (cute::gemm on shared-memory partitions). Correctness first: no tensor cores,
no cp.async pipeline; the stages (copy atoms, MMA atoms, pipelining) are what the search adds.
"""

import torch
import torch.nn as nn
from evoforge.backends.cute import load

LANGUAGE = "cute"

CUDA_SRC = r"""
#include <cute/tensor.hpp>
#include <cstdint>
using namespace cute;

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif

// Torch's row-major operands in CuTe's GEMM convention, where every operand is (rows, K):
//   A (M,K):(K,1) "K-major";  B seen as (N,K):(1,N) "N-major";  C (M,N):(N,1).
template <int kBM, int kBN, int kBK>
__global__ void __launch_bounds__(256)
gemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  static_assert(kBM % 32 == 0 && kBN % 32 == 0 && kBK % 8 == 0, "tile sizes must fit the 32x8 copy layouts");
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(int64_t(K), Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(Int<1>{}, int64_t(N)));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), Int<1>{}));
  // Identity tensors give each element its (row, col) coordinate: the predicates for the edges.
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

  // Shared tiles. sA is M-major with 4 floats of padding per K column: the 32x8 K-fast copy below then
  // stores without bank conflicts. sB is N-major, unpadded (its copy runs along N).
  __shared__ float smemA[(kBM + 4) * kBK];
  __shared__ float smemB[kBN * kBK];
  Tensor sA = make_tensor(make_smem_ptr(smemA),
                          make_layout(make_shape(Int<kBM>{}, Int<kBK>{}), make_stride(Int<1>{}, Int<kBM + 4>{})));
  Tensor sB = make_tensor(make_smem_ptr(smemB), make_layout(make_shape(Int<kBN>{}, Int<kBK>{})));

  // Copy partitions: A's threads run along K (contiguous in memory), B's along N.
  auto tA = make_layout(make_shape(Int<32>{}, Int<8>{}), LayoutRight{});   // (32,8):(8,1)
  auto tB = make_layout(make_shape(Int<32>{}, Int<8>{}));                  // (32,8):(1,32)
  Tensor tAgA = local_partition(gA, tA, threadIdx.x);    // (BM/32,BK/8,k_tiles)
  Tensor tAcA = local_partition(gcA, tA, threadIdx.x);
  Tensor tAsA = local_partition(sA, tA, threadIdx.x);    // (BM/32,BK/8)
  Tensor tBgB = local_partition(gB, tB, threadIdx.x);
  Tensor tBcB = local_partition(gcB, tB, threadIdx.x);
  Tensor tBsB = local_partition(sB, tB, threadIdx.x);

  // Compute partitions: 16x16 threads, each owning rows m = tm + 16 i and columns n = tn + 16 j of the tile.
  auto tC = make_layout(make_shape(Int<16>{}, Int<16>{}));
  Tensor tCsA = local_partition(sA, tC, threadIdx.x, Step<_1,  X>{});   // (BM/16,BK)
  Tensor tCsB = local_partition(sB, tC, threadIdx.x, Step< X, _1>{});   // (BN/16,BK)
  Tensor tCgC = local_partition(gC, tC, threadIdx.x, Step<_1, _1>{});   // (BM/16,BN/16)
  Tensor tCcC = local_partition(gcC, tC, threadIdx.x, Step<_1, _1>{});
  Tensor tCrC = make_tensor_like(tCgC);                                 // fp32 accumulators in registers
  clear(tCrC);

  int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    Tensor tAgAk = tAgA(_, _, kt);
    Tensor tAcAk = tAcA(_, _, kt);
    Tensor tBgBk = tBgB(_, _, kt);
    Tensor tBcBk = tBcB(_, _, kt);
    CUTE_UNROLL
    for (int i = 0; i < size(tAsA); ++i) {   // past M or K: zero, which adds nothing to the sum
      tAsA(i) = elem_less(tAcAk(i), shape(mA)) ? tAgAk(i) : 0.f;
    }
    CUTE_UNROLL
    for (int i = 0; i < size(tBsB); ++i) {
      tBsB(i) = elem_less(tBcBk(i), shape(mB)) ? tBgBk(i) : 0.f;
    }
    __syncthreads();
    gemm(tCsA, tCsB, tCrC);                  // tCrC(m,n) += sum_k tCsA(m,k) * tCsB(n,k)
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
  gemm_kernel<BM, BN, BK><<<grid, dim3(256), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError();
}
"""

SPACE = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16, 32]}
PARAMS = {"BM": 128, "BN": 128, "BK": 8}


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
