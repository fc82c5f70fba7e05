"""Matrix multiplication: starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.matmul.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
