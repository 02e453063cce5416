"""bf16 GEMM C = A @ B at 4096 x 4096 x 4096: the H200 suite's bf16 GEMM row.

The bar is at least 95% of cuBLAS, which is what the reference is: torch.matmul on bf16 operands (fp32
accumulation, bf16 output). KernelBench's own square matmul (level1/1) is fp32, where the tensor cores need a
split-operand trick; this task asks for the plain bf16 tensor-core GEMM. M, N and K are separate module
constants so a check can shrink or skew the problem (--set M=128 --set N=128 --set K=128).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A (M, K) and B (K, N) in bf16; C is bf16."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 4096
N = 4096
K = 4096


def get_inputs():
    A = torch.randn(M, K).to(torch.bfloat16)
    B = torch.randn(K, N).to(torch.bfloat16)
    return [A, B]


def get_init_inputs():
    return []
