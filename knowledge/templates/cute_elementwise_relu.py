"""CuTe seed: elementwise ReLU (KernelBench L1/19), fp32, any shape.

Each thread owns VEC contiguous elements of a THREADS*VEC tile: one 128-bit load and store when VEC=4 and the
pointers are 16-byte aligned (checked on the host; an unaligned view gets the VEC=1 kernel). The last, partial
tile is predicated element by element with an identity tensor. NaN propagates as in torch.relu.
"""

import torch
import torch.nn as nn
from evoforge.backends.cute import load

LANGUAGE = "cute"

CUDA_SRC = r"""
#include <cute/tensor.hpp>
#include <cstdint>
using namespace cute;

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 4
#endif

template <int kThreads, int kVec>
__global__ void __launch_bounds__(kThreads)
relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  constexpr int kTile = kThreads * kVec;
  Tensor mX = make_tensor(make_gmem_ptr(x), make_shape(n));                     // (n):(_1)
  Tensor mY = make_tensor(make_gmem_ptr(y), make_shape(n));
  Tensor cX = make_identity_tensor(shape(mX));                                  // element -> its index
  // This block's tile, then this thread's VEC contiguous elements of it: (kVec):(_1), static layout.
  Tensor gX = local_tile(mX, make_shape(Int<kTile>{}), make_coord(int64_t(blockIdx.x)));  // 64-bit offsets
  Tensor gY = local_tile(mY, make_shape(Int<kTile>{}), make_coord(int64_t(blockIdx.x)));
  Tensor gC = local_tile(cX, make_shape(Int<kTile>{}), make_coord(int64_t(blockIdx.x)));
  Tensor tXgX = local_tile(gX, make_shape(Int<kVec>{}), make_coord(threadIdx.x));
  Tensor tYgY = local_tile(gY, make_shape(Int<kVec>{}), make_coord(threadIdx.x));
  Tensor tXcX = local_tile(gC, make_shape(Int<kVec>{}), make_coord(threadIdx.x));
  Tensor tXrX = make_fragment_like(tXgX);                                       // registers
  if (elem_less(tXcX(kVec - 1), shape(mX))) {  // the whole vector is in range: vectorized copy
    copy_aligned(tXgX, tXrX);
    CUTE_UNROLL
    for (int i = 0; i < kVec; ++i) {
      float v = tXrX(i);
      tXrX(i) = v < 0.f ? 0.f : v;      // keeps NaN, as torch.relu does
    }
    copy_aligned(tXrX, tYgY);
  } else {                              // the tail: predicate each element
    CUTE_UNROLL
    for (int i = 0; i < kVec; ++i) {
      if (elem_less(tXcX(i), shape(mX))) {
        float v = tXgX(i);
        tYgY(i) = v < 0.f ? 0.f : v;
      }
    }
  }
}

extern "C" cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  bool aligned = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(y) % 16 == 0);
  if (aligned) {
    int64_t blocks = (n + THREADS * VEC - 1) / (THREADS * VEC);
    relu_kernel<THREADS, VEC><<<dim3(static_cast<unsigned>(blocks)), dim3(THREADS), 0, stream>>>(x, y, n);
  } else {
    int64_t blocks = (n + THREADS - 1) / THREADS;
    relu_kernel<THREADS, 1><<<dim3(static_cast<unsigned>(blocks)), dim3(THREADS), 0, stream>>>(x, y, n);
  }
  return cudaGetLastError();
}
"""

SPACE = {"THREADS": [128, 256, 512, 1024], "VEC": [1, 2, 4, 8]}
PARAMS = {"THREADS": 256, "VEC": 4}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"this kernel is written for float32, got {x.dtype}")
        lib = load(CUDA_SRC, params=PARAMS)
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu_forward(x, y, x.numel(), None)
        return y
