"""Softmax over dim 1 of a 4096 x 65536 fp32 input: KernelBench level 1 problem 23 at the size of Stanford
CRFM's "fast kernels" study. Each row is 256 KB: too wide to keep whole in one program's registers cheaply,
small enough that a second read of it mostly hits L2.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


BATCH, DIM = 4096, 65536


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
