"""Rotary position embedding, NeoX / Llama style (KernelBench format).

x is (batch, heads, seq, head_dim); cos and sin are (seq, head_dim) in Hugging Face's layout (the angles of the
first half repeated in the second). The rotation pairs element i with element i + head_dim / 2:
out = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1). The timed case: bf16 (4, 32, 4096, 128).
"""
import torch
import torch.nn as nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return x * cos + rotate_half(x) * sin


BATCH, HEADS, SEQ, HEAD_DIM = 4, 32, 4096, 128


def get_inputs():
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
    freqs = torch.outer(torch.arange(SEQ, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [x, emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)]


def get_init_inputs():
    return []
