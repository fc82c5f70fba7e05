"""Attention forward (causal): flash-attention starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.flash_attention_causal.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
