"""fp16 GEMM C = A @ B at 4096 x 4096 x 4096.

The reference is torch.matmul on fp16 operands (cuBLAS: fp32 accumulation, fp16 output). Its seed,
knowledge/templates/matmul_fp16.py, offers two faster choices that fail this task's fp16 tolerance (an fp16
accumulator, fp8 operands): the task on which a search must learn which values are unsafe. M, N and K are
separate module constants so a check can shrink or skew the problem (--set M=128 --set N=128 --set K=128).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A (M, K) and B (K, N) in fp16; C is fp16."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 4096
N = 4096
K = 4096


def get_inputs():
    A = torch.randn(M, K).to(torch.float16)
    B = torch.randn(K, N).to(torch.float16)
    return [A, B]


def get_init_inputs():
    return []
