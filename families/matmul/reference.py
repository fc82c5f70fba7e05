"""Matrix product C = A @ B (KernelBench format). The timed case: bf16 4096 x 4096 x 4096.

fp32 inputs are multiplied in fp32 (torch's default: no TF32), low-precision inputs accumulate in fp32.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M = N = K = 4096


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
