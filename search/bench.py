"""KernelBench's fast_p over a batch of problems: a pure function of each problem's best result.

fast_p is the fraction of ALL problems in the batch whose best kernel is correct and faster than p times the
baseline (speedup > p). At p = 0 it is the fraction with a correct kernel, timed or not. A problem that was not
searched, or found no correct kernel, counts in the denominator and never in the numerator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

P_VALUES = (0.0, 1.0, 1.5, 2.0)   # the p's `kernelsearch bench` reports, as KernelBench does


@dataclass(frozen=True)
class ProblemScore:
    """One problem's best result against one baseline (eager, or torch.compile)."""

    correct: bool                    # the problem has a correct kernel
    speedup: Optional[float] = None  # that kernel's speedup over the baseline; None: not measured


def fast_p(scores: Sequence[ProblemScore], p: float) -> float:
    """The fraction of `scores` that are correct and (for p > 0) have a measured speedup > p."""
    if not scores:
        raise ValueError("fast_p: the batch has no problems")
    if p < 0:
        raise ValueError(f"fast_p: p must be >= 0, not {p}")
    if p == 0:
        hits = sum(1 for s in scores if s.correct)
    else:
        hits = sum(1 for s in scores if s.correct and s.speedup is not None and s.speedup > p)
    return hits / len(scores)
