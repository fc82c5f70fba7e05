"""SwiGLU MLP: fused gate/up starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.fused_mlp.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
