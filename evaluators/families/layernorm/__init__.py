"""LayerNorm over the last dimension: starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.layernorm.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
