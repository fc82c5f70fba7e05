"""Sum over the last dimension: starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.reduce.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
