"""Attention forward, softmax(q k^T / sqrt(d)) v, causal (KernelBench format).

q, k, v are (batch, heads, seq, head_dim); query i attends to keys 0..i. The timed case: bf16 (4, 32, 4096, 128).
The full problem is the sibling family flash_attention; the constructor's `causal` flag selects the mask in both.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


BATCH, HEADS, SEQ, HEAD_DIM = 4, 32, 4096, 128


def get_inputs():
    return [torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return [True]
