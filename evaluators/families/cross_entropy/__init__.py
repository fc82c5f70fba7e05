"""Cross-entropy with ignore_index and a mean over the targets kept: starter kernel and search space."""
from kernelsearch.evaluators.families.cross_entropy.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
