"""LayerNorm over the last dimension with a learned weight and bias (KernelBench format).

The timed case: bf16 activations of 8192 x 4096 with bf16 affine parameters. PyTorch computes the statistics
in fp32 and rounds the result once.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        # drawn at random (ones and zeros would let a kernel that forgets the affine step pass)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(getattr(torch, dtype)))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden_size)).to(getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


ROWS, HIDDEN = 8192, 4096


def get_inputs():
    return [torch.randn(ROWS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, 1e-5, "bfloat16"]
