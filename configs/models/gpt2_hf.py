"""A GPT-2-style decoder from Hugging Face `transformers`, built from a config with random weights (no download), in
the problem contract. Needs the optional extra: `pip install -e '.[models]'`.

Sizes as llama_style.py: KERNELSEARCH_MODEL_SIZE=gpu (hidden 1600, 25 heads, 4 layers, 8 x 512 tokens, bf16; the
GPT-2 XL width) or tiny (hidden 64, 4 heads, 2 layers, 2 x 16 tokens, fp32); by default gpu where CUDA is available.
The model's input is token ids; its output the logits (vocabulary 50257 on a GPU, 512 tiny). Attention is the
eager implementation (softmax over materialised scores), so its softmax is a problem of its own.
"""
import os

import torch
import torch.nn as nn

SIZES = {
    "gpu": dict(hidden=1600, heads=25, layers=4, vocab=50257, batch=8, seq=512, dtype="bfloat16"),
    "tiny": dict(hidden=64, heads=4, layers=2, vocab=512, batch=2, seq=16, dtype="float32"),
}
SIZE = os.environ.get("KERNELSEARCH_MODEL_SIZE") or ("gpu" if torch.cuda.is_available() else "tiny")
CFG = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, hidden: int, heads: int, layers: int, vocab: int, seq: int, dtype: str):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_embd=hidden, n_head=heads, n_layer=layers, vocab_size=vocab, n_positions=seq,
                            attn_implementation="eager", use_cache=False)
        self.gpt2 = GPT2LMHeadModel(config).to(getattr(torch, dtype))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.gpt2(input_ids=input_ids).logits


def get_init_inputs():
    return [CFG["hidden"], CFG["heads"], CFG["layers"], CFG["vocab"], CFG["seq"], CFG["dtype"]]


def get_inputs():
    return [torch.randint(0, CFG["vocab"], (CFG["batch"], CFG["seq"]))]
