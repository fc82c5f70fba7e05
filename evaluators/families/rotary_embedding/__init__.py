"""Rotary position embedding (NeoX halves): starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.rotary_embedding.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
