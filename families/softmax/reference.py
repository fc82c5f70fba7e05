"""Softmax over the last dimension (KernelBench format). The timed case: bf16 logits of 4096 x 32000."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


ROWS, COLS = 4096, 32000


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.bfloat16) * 4]


def get_init_inputs():
    return []
