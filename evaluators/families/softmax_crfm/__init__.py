"""Softmax of 4096 x 65536 fp32, the CRFM problem: starter kernel and offline search space (see space.py)."""
from kernelsearch.evaluators.families.softmax_crfm.space import SPACE

STARTER = SPACE.render(SPACE.default)

__all__ = ["SPACE", "STARTER"]
