"""RMSNorm over the last dimension with a learned weight (KernelBench format), as in Llama.

The timed case: bf16 activations of 8192 x 4096 with a bf16 weight. The statistics are taken in fp32 and the
result is rounded once; this eager form is what a model written by hand runs (several kernels, each a full
pass over the activations).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        # drawn at random (a weight of ones would let a kernel that forgets it pass)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.promote_types(x.dtype, torch.float32))  # fp32 math; float64 stays float64
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rstd * self.weight.to(xf.dtype)).to(x.dtype)


ROWS, HIDDEN = 8192, 4096


def get_inputs():
    return [torch.randn(ROWS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, 1e-6, "bfloat16"]
