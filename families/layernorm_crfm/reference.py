"""LayerNorm over the last three dimensions, (64, 256, 256), of a (16, 64, 256, 256) fp32 input, with an
elementwise affine: KernelBench level 1 problem 40, the problem of Stanford CRFM's "fast kernels" study.

As KernelBench has it, except that the affine parameters are drawn at random: nn.LayerNorm's ones and zeros
would let a kernel that skips them pass. Each of the 16 rows is 4M elements, so one program per row cannot
fill the GPU.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.1 * torch.randn(normalized_shape))
            self.ln.bias.copy_(0.1 * torch.randn(normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


BATCH, FEATURES, DIM1, DIM2 = 16, 64, 256, 256


def get_inputs():
    return [torch.randn(BATCH, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return [(FEATURES, DIM1, DIM2)]
