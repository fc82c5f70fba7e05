"""Seed selection: the fastest correct kernels by their own time, kept diverse (not all children of one idea)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Scored:
    kernel_id: int
    idea_id: int | None
    time_ms: float             # the kernel's own time (the median of its timings; store/clock.py); lower is faster
    elsewhere: bool = False    # timed only on another device than the run's: ranked after the others


def rank(scored: list[Scored]) -> list[Scored]:
    """Fastest first (those timed on the run's device before the others), ties to the older kernel."""
    return sorted(scored, key=lambda s: (s.elsewhere, s.time_ms, s.kernel_id))


def pick_seeds(scored: list[Scored], k: int) -> list[Scored]:
    """Best first; one kernel per idea until every idea has had its best in, then the rest by speed."""
    ranked = rank(scored)
    chosen, ideas = [], set()
    for s in ranked:
        if len(chosen) == k:
            return chosen
        if s.idea_id not in ideas:
            chosen.append(s)
            ideas.add(s.idea_id)
    for s in ranked:
        if len(chosen) == k:
            break
        if s not in chosen:
            chosen.append(s)
    return chosen
