"""SwiGLU MLP, down(silu(gate(x)) * up(x)), as in Llama (KernelBench format).

The timed case: bf16 x of 4096 tokens x 4096, intermediate size 11008 (Llama-2-7B), weights without bias.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, dtype: str = "float32"):
        super().__init__()
        dt = getattr(torch, dtype)
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False, dtype=dt)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False, dtype=dt)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False, dtype=dt)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


TOKENS, HIDDEN, INTERMEDIATE = 4096, 4096, 11008


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE, "bfloat16"]
