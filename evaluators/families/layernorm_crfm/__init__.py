"""LayerNorm over (64, 256, 256), the CRFM problem: starter kernel and search space (see space.py)."""
from kernelsearch.evaluators.families.layernorm_crfm.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
