"""Attention (causal): the shapes, tolerances and counts of flash_attention, with the causal mask."""
from __future__ import annotations

from kernelsearch.evaluators.families.flash_attention.spec import (  # noqa: F401 - the spec interface
    TOLERANCES,
    bytes_moved,
    cases,
    flops,
    init_inputs,
    make_inputs,
)

CASES = cases(causal=True)
