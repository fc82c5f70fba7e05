"""Sum over the last dimension (KernelBench format). The timed case: fp32 8192 x 8192.

The result has the input's dtype and drops the reduced dimension; torch accumulates low-precision inputs in
fp32.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


ROWS, COLS = 8192, 8192


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
