"""Attention (causal) search space: flash_attention's kernels, plus the diagonal split that only a causal mask
makes worth having (see flash_attention/space.py; the figures: ../flash_attention/NOTES.md)."""
from kernelsearch.families.flash_attention.space import make_space
from kernelsearch.families.flash_attention_causal.spec import CASES

SPACE = make_space(causal=True, cases=CASES)
