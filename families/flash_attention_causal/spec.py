"""Attention (causal): the shapes, tolerances and counts of flash_attention, with the causal mask."""
from __future__ import annotations

import dataclasses

from kernelsearch.judge.problem import family_spec_module

# read through the judge's loader, as the judge reads every spec: by path, never through the families package
_full = family_spec_module("flash_attention")
_FULL, cases = _full.SPEC, _full.cases

CASES = cases(causal=True)

SPEC = dataclasses.replace(_FULL, cases=CASES)
