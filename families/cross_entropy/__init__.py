"""Cross-entropy with ignore_index and a mean over the targets kept: starter kernel (starter.py), search
space (space.py)."""
from pathlib import Path

from kernelsearch.families.cross_entropy.space import SPACE

# the space's default rendered, kept equal to it by tests/families/test_starters.py (regenerate with
# `python -m kernelsearch.families`)
STARTER = (Path(__file__).parent / "starter.py").read_text()

__all__ = ["SPACE", "STARTER"]
