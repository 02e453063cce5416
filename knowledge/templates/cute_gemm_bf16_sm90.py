"""CuTe seed: C = A @ B in bf16 on Hopper (sm_90a): TMA loads, wgmma, a warp-specialised pipeline.

Built the way a CUTLASS developer builds a Hopper GEMM: CUTLASS 3's CuTe-based collective builders pick the
TMA copy atoms, the shared-memory layouts (swizzled for wgmma) and the wgmma atom for the tile; a producer warp
issues TMA loads into a STAGES-deep ring of shared-memory buffers guarded by mbarriers, and consumer warpgroups
run wgmma on them (``cooperative``: two warpgroups share one 128-row tile; ``pingpong``: two warpgroups take
turns on separate tiles, so one's epilogue hides behind the other's math). The kernel is persistent (one CTA per
SM walks the tiles) and launched in clusters of CLUSTER_M x CLUSTER_N CTAs that share operand loads through TMA
multicast. Accumulation is fp32; C is written through a TMA epilogue.

Torch's row-major operands map onto CUTLASS's convention as A (M,K) K-major, B seen as (N,K) N-major, C (M,N)
row-major. TMA needs every row start 16-byte aligned: ``forward`` pads K and N up to a multiple of 8 (a copy)
when the task's sizes are not, and slices the result back. Any M, N, K.

Tuning space: the CTA tile (TILE_M x TILE_N x TILE_K), the cluster shape, the kernel schedule, the pipeline
depth (STAGES; 0 lets the builder fill the shared memory left after the epilogue) and how tiles are dealt
(TILES: ``persistent`` whole tiles, or ``streamk``, which splits K over CTAs when the tiles are too few to fill
the GPU, as in a 256 x 256 output with a long K; cooperative only), and the order the tiles are walked in
(RASTER, and SWIZZLE: bands of 1-8 tiles, for L2 reuse between the CTAs running at once); with ``streamk``,
SPLITS > 1 forces split-K in that many slices, and REDUCTION says whether the partial tiles are summed in K order
(deterministic) or as they finish. ``cooperative`` needs TILE_M a multiple of 128; the knowledge base's rule
``cute-sm90-gemm-config`` keeps illegal points (and SPLITS or REDUCTION without stream-K, which change nothing)
from being compiled at all.
"""

import torch
import torch.nn as nn
from evoforge.backends.cute import load

LANGUAGE = "cute"

CUDA_SRC = r"""
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/bfloat16.h>
#include <cutlass/kernel_hardware_info.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cstdint>
using namespace cute;

#ifndef TILE_M
#define TILE_M 128
#endif
#ifndef TILE_N
#define TILE_N 256
#endif
#ifndef TILE_K
#define TILE_K 64
#endif
#ifndef CLUSTER_M
#define CLUSTER_M 2
#endif
#ifndef CLUSTER_N
#define CLUSTER_N 1
#endif
#ifndef SCHEDULE
#define SCHEDULE cooperative
#endif
#ifndef STAGES
#define STAGES 0
#endif
#ifndef TILES
#define TILES persistent
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef RASTER
#define RASTER heuristic
#endif
#ifndef SPLITS
#define SPLITS 1
#endif
#ifndef REDUCTION
#define REDUCTION deterministic
#endif

namespace evo {
struct cooperative {};
struct pingpong {};
template <class S> struct Schedules;
template <> struct Schedules<cooperative> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
template <> struct Schedules<pingpong> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};
// How output tiles are dealt to the persistent CTAs: whole tiles, or stream-K (K split across CTAs where the
// tiles are too few to fill the GPU: a 256 x 256 output with a long K).
struct persistent {
  using Scheduler = cutlass::gemm::PersistentScheduler;
  template <class Args> static void split(Args&) {}  // whole tiles: nothing to split
};
// Stream-K's own decomposition (SPLITS 1: data-parallel, split-K or stream-K by CUTLASS's heuristic), or split-K in
// SPLITS slices of K, each a CTA; the partial tiles meet in a workspace, in K order (REDUCTION deterministic: a
// turnstile) or as they finish (nondeterministic: no waiting; fp32 sums in another order on every run).
struct deterministic { static constexpr bool ordered = true; };
struct nondeterministic { static constexpr bool ordered = false; };
struct streamk {
  using Scheduler = cutlass::gemm::StreamKScheduler;
  template <class Args> static void split(Args& a) {
    using Decomposition = decltype(a.decomposition_mode);
    using Reduction = decltype(a.reduction_mode);
    a.splits = SPLITS;
    if (SPLITS > 1) a.decomposition_mode = Decomposition::SplitK;
    a.reduction_mode = REDUCTION::ordered ? Reduction::Deterministic : Reduction::Nondeterministic;
  }
};
// The order the persistent CTAs walk the output tiles in (RasterOrderOptions: Heuristic, AlongM, AlongN); with
// SWIZZLE > 1 they walk it in bands of that many tiles, so the CTAs running at once share rows of A and columns
// of B in L2.
struct heuristic { static constexpr int order = 0; };
struct along_m { static constexpr int order = 1; };
struct along_n { static constexpr int order = 2; };
}  // namespace evo

using Element = cutlass::bfloat16_t;
using Accumulator = float;
using LayoutA = cutlass::layout::RowMajor;   // A (M,K), K contiguous
using LayoutB = cutlass::layout::RowMajor;   // B (K,N), N contiguous: CuTe's (N,K) N-major
using LayoutC = cutlass::layout::RowMajor;
constexpr int kAlign = 16 / sizeof(Element);  // TMA: 16-byte aligned rows
using TileShape = Shape<Int<TILE_M>, Int<TILE_N>, Int<TILE_K>>;
using ClusterShape = Shape<Int<CLUSTER_M>, Int<CLUSTER_N>, _1>;
using Sched = evo::Schedules<evo::SCHEDULE>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Accumulator,
    void, LayoutC, kAlign,          // no C operand (beta = 0): nothing read
    Element, LayoutC, kAlign,       // D
    typename Sched::Epilogue>::CollectiveOp;

#if STAGES > 0
using Stages = cutlass::gemm::collective::StageCount<STAGES>;
#else
using Stages = cutlass::gemm::collective::StageCountAutoCarveout<
    static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#endif

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, LayoutA, kAlign, Element, LayoutB, kAlign, Accumulator,
    TileShape, ClusterShape, Stages, typename Sched::Kernel>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue, evo::TILES::Scheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

static void* g_workspace = nullptr;
static size_t g_workspace_bytes = 0;
static int g_sm_count = 0;

extern "C" cudaError_t gemm_forward(const void* A, const void* B, void* C, int M, int N, int K,
                                    cudaStream_t stream) {
  if (M == 0 || N == 0) return cudaSuccess;
  if (g_sm_count == 0) {
    int device = 0;
    cudaGetDevice(&device);
    g_sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  }
  typename GemmKernel::StrideA stride_a = make_stride(int64_t(K), Int<1>{}, int64_t(M) * K);
  typename GemmKernel::StrideB stride_b = make_stride(Int<1>{}, int64_t(N), int64_t(N) * K);
  typename GemmKernel::StrideD stride_d = make_stride(int64_t(N), Int<1>{}, int64_t(M) * N);
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {M, N, K, 1},
      {static_cast<const Element*>(A), stride_a, static_cast<const Element*>(B), stride_b},
      {{1.0f, 0.0f}, nullptr, stride_d, static_cast<Element*>(C), stride_d}};
  args.hw_info.sm_count = g_sm_count;
  args.scheduler.max_swizzle_size = SWIZZLE;
  args.scheduler.raster_order = static_cast<decltype(args.scheduler.raster_order)>(evo::RASTER::order);
  evo::TILES::split(args.scheduler);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  size_t bytes = Gemm::get_workspace_size(args);
  if (bytes > g_workspace_bytes) {
    if (g_workspace) cudaFree(g_workspace);
    cudaError_t err = cudaMalloc(&g_workspace, bytes);
    if (err != cudaSuccess) { g_workspace = nullptr; g_workspace_bytes = 0; return err; }
    g_workspace_bytes = bytes;
  }
  if (gemm.initialize(args, g_workspace, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    cudaError_t err = cudaGetLastError();
    return err != cudaSuccess ? err : cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}

// for the record: which kernel this build is
__global__ void evoforge_gemm_bf16_sm90_tag() {}
"""

SPACE = {
    "TILE_M": [64, 128, 256],
    "TILE_N": [64, 128, 256],
    "TILE_K": [32, 64, 128],
    "CLUSTER_M": [1, 2],
    "CLUSTER_N": [1, 2],
    "SCHEDULE": ["cooperative", "pingpong"],
    "STAGES": [0, 3, 4, 5],
    "TILES": ["persistent", "streamk"],
    "SWIZZLE": [1, 2, 4, 8],
    "RASTER": ["heuristic", "along_m", "along_n"],
    "SPLITS": [1, 2, 4, 8, 16, 32],
    "REDUCTION": ["deterministic", "nondeterministic"],
}
PARAMS = {"TILE_M": 128, "TILE_N": 256, "TILE_K": 64, "CLUSTER_M": 2, "CLUSTER_N": 1, "SCHEDULE": "cooperative",
          "STAGES": 0, "TILES": "persistent", "SWIZZLE": 1, "RASTER": "heuristic", "SPLITS": 1,
          "REDUCTION": "deterministic"}

_ALIGN = 8  # bf16 elements in 16 bytes


def _aligned(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``t`` (r, c) in a zero-padded (rows, cols) buffer: TMA reads rows that start on 16-byte boundaries (and a
    base address on one: a view that starts mid-row is copied)."""
    if t.shape == (rows, cols) and t.data_ptr() % 16 == 0:
        return t
    out = torch.zeros((rows, cols), device=t.device, dtype=t.dtype)
    out[: t.shape[0], : t.shape[1]].copy_(t)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"expected A (M,K) and B (K,N), got {tuple(A.shape)} and {tuple(B.shape)}")
        if A.dtype != torch.bfloat16 or B.dtype != torch.bfloat16:
            raise TypeError(f"this kernel is written for bfloat16, got {A.dtype} and {B.dtype}")
        lib = load(CUDA_SRC, params=PARAMS)
        M, K = A.shape
        N = B.shape[1]
        Kp, Np = -(-K // _ALIGN) * _ALIGN, -(-N // _ALIGN) * _ALIGN
        A = _aligned(A.contiguous(), M, Kp)
        B = _aligned(B.contiguous(), Kp, Np)
        C = torch.empty((M, Np), device=A.device, dtype=A.dtype)
        if K == 0:
            return C[:, :N].zero_()
        lib.gemm_forward(A, B, C, M, Np, Kp, None)
        return C if Np == N else C[:, :N]
