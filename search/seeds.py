"""Seed selection: the fastest correct kernels, kept diverse (not all children of one idea)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Scored:
    kernel_id: int
    idea_id: int | None
    speedup: float


def pick_seeds(scored: list[Scored], k: int) -> list[Scored]:
    """Best first; one kernel per idea until every idea has had its best in, then the rest by speed."""
    ranked = sorted(scored, key=lambda s: (-s.speedup, s.kernel_id))
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
