"""A small LLaMA-style decoder stack in plain torch, in the problem contract (Model, get_init_inputs, get_inputs).

RMSNorm, causal attention written out (q @ k^T, softmax, @ v: the scores are materialised, as in eager Hugging Face
code), a SwiGLU MLP, residuals. Its input is the hidden states (no embedding or LM head). Two sizes: `gpu` (hidden
4096, 32 heads, intermediate 11008, 4 layers, batch 8 x 512 tokens, bf16) and `tiny` (hidden 64, 4 heads, 2
layers, 2 x 16 tokens, fp32: the Triton interpreter checks bf16 dots wrongly). KERNELSEARCH_MODEL_SIZE picks one;
by default `gpu` where CUDA is available, else `tiny`.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    "gpu": dict(hidden=4096, heads=32, intermediate=11008, layers=4, batch=8, seq=512, dtype="bfloat16"),
    "tiny": dict(hidden=64, heads=4, intermediate=128, layers=2, batch=2, seq=16, dtype="float32"),
}
SIZE = os.environ.get("KERNELSEARCH_MODEL_SIZE") or ("gpu" if torch.cuda.is_available() else "tiny")
CFG = SIZES[SIZE]


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rstd * self.weight.float()).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (p(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim) + mask
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int):
        super().__init__()
        self.input_norm = RMSNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.post_norm = RMSNorm(hidden)
        self.mlp = MLP(hidden, intermediate)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), mask)
        return x + self.mlp(self.post_norm(x))


class Model(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int, layers: int, seq: int, dtype: str):
        super().__init__()
        self.layers = nn.ModuleList(Block(hidden, heads, intermediate) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        causal = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", causal, persistent=False)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.mask[: x.shape[1], : x.shape[1]]
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


def get_init_inputs():
    return [CFG["hidden"], CFG["heads"], CFG["intermediate"], CFG["layers"], CFG["seq"], CFG["dtype"]]


def get_inputs():
    return [torch.randn(CFG["batch"], CFG["seq"], CFG["hidden"], dtype=getattr(torch, CFG["dtype"]))]
