"""Sum over the last dimension: starter kernel (starter.py) and offline search space (space.py)."""
from pathlib import Path

from kernelsearch.families.reduce.space import SPACE
from kernelsearch.families.reduce.space_cuda import CUDA_SPACE

# the space's default rendered, kept equal to it by tests/families/test_starters.py (regenerate with
# `python -m kernelsearch.families`)
STARTER = (Path(__file__).parent / "starter.py").read_text()

# the CUDA C++ space's default rendered (starter_cuda.py), kept equal to it the same way
CUDA_STARTER = (Path(__file__).parent / "starter_cuda.py").read_text()

__all__ = ["SPACE", "STARTER", "CUDA_SPACE", "CUDA_STARTER"]
