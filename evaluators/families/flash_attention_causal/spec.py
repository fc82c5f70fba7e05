"""Attention (causal): the shapes, tolerances and counts of flash_attention, with the causal mask."""
from __future__ import annotations

import dataclasses

from kernelsearch.evaluators.families.flash_attention.spec import SPEC as _FULL
from kernelsearch.evaluators.families.flash_attention.spec import cases

CASES = cases(causal=True)

SPEC = dataclasses.replace(_FULL, cases=CASES)
