"""Attention forward (full): flash-attention starter kernel (starter.py) and offline search space (space.py)."""
from pathlib import Path

from kernelsearch.families.flash_attention.space import SPACE

# the space's default rendered, kept equal to it by tests/families/test_starters.py (regenerate with
# `python -m kernelsearch.families`)
STARTER = (Path(__file__).parent / "starter.py").read_text()

__all__ = ["SPACE", "STARTER"]
