"""Search strategies: how each round's parents and its shape (ideas, branches per idea) are chosen.

Every strategy uses the same machinery (search/controller.py): the same idea writer and coder with the same
prompts, the same evaluator pool, store, budgets, stop rules and resume. A strategy only decides, from what the
store holds (the run's tree), which kernels the round's ideas hang under and how many ideas and branches it asks
for; so a resumed run makes the choices it would have made. Each is a pure function of the tree, the settings and
the round number (and the config's seed, for the evolutionary one's sampling).

- `branching` (the default, the method this project implements): the fastest correct kernels, kept diverse
  (one per idea first), are the seeds; `ideas_per_round` ideas over them, `branches_per_idea` branches each.
- `sequential` (the loop of revising one kernel, as autoresearch-style tools do): one idea and one kernel a round,
  always on the current kernel; a correct kernel faster than the current one becomes current (kept), anything
  else is dropped and the next step revises the current one again (reverted to the best).
- `best_of_n` (the one-shot baseline): independent kernels from the starting point, never revised. With a starter
  (a family's, or a `starter:` file) each idea hangs under the starter, whatever was found since; with no starter
  every round is a round of first kernels written from the reference. Its ideas still see what was tried (so they
  are not repeated), but no kernel is ever built on a later one.
- `evolutionary` (the form of the open evolutionary-search systems): the population is every correct kernel; each
  round samples `ideas_per_round` distinct parents, weighted by speed (the best time over its time, squared) and novelty
  (fewer children so far, and not a parent, child or sibling of a parent already drawn this round), from a
  random generator seeded by the config's seed and the round; one idea per parent, one branch each.

Every strategy ranks kernels by their own time (the median of their timings, store/clock.py), never by a speedup
whose reference was timed in the same evaluation; `finalists` are the kernels the controller re-times before a
round's parents are chosen and before the run finishes.

Whatever the strategy, a problem with no starter writes first kernels from the reference until one is correct. A
kernel is `spent` once a round with it as a parent stored no new kernel (the idea writer had nothing new for it, or
every branch was a duplicate): the strategies choose among the others, so a search whose best kernels are worked
out goes on from the next ones instead of asking about them again (the controller keeps this set while it runs).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from kernelsearch.search.seeds import Scored, pick_seeds, rank
from kernelsearch.search.settings import STRATEGIES, SearchSetup
from kernelsearch.store.queries import RunTree

NOVELTY_SHARE = 0.5    # evolutionary: a candidate related to a parent already drawn this round keeps half its weight
WEIGHT_FLOOR = 0.02    # evolutionary: the slowest correct kernel can still be drawn


@dataclass(frozen=True)
class Plan:
    """One round's shape: the kernels its ideas hang under (best first), how many ideas, how many branches each.
    `first`: a round of first kernels written from the reference (no parents, no idea writer)."""

    parents: tuple[int, ...]
    ideas: int
    branches: int
    first: bool = False


def _scored(tree: RunTree, kernel_id: int) -> Scored:
    k, t = tree.kernels[kernel_id], tree.clock.times[kernel_id]
    return Scored(k.id, k.idea_id, t.time_ms, t.device != tree.clock.device)


def _correct(tree: RunTree, spent: frozenset[int] = frozenset()) -> list[Scored]:
    """The ranked kernels (correct, timed, no re-timing found them wrong) but the spent ones, by their own time."""
    return [_scored(tree, k.id) for k in tree.kernels.values() if k.ranked and k.id not in spent]


def finalists(tree: RunTree, n: int) -> list[int]:
    """The kernels to re-time before a round's parents are chosen and before the run finishes: the n that
    branching would seed from at n seeds (the fastest, kept diverse, spent ones included); the best first."""
    return [c.kernel_id for c in pick_seeds(_correct(tree), n)]


def _root(tree: RunTree) -> list[int]:
    """The run's first kernel (its starter), as a parent when nothing is correct yet, failures and all."""
    return [min(tree.kernels)] if tree.kernels else []


def branching(tree: RunTree, setup: SearchSetup, rnd: int, spent: frozenset[int] = frozenset()) -> Plan:
    s = setup.search
    chosen = [c.kernel_id for c in pick_seeds(_correct(tree, spent), s.seeds_per_round)]
    return Plan(tuple(chosen or _root(tree)), s.ideas_per_round, s.branches_per_idea)


def current_kernel(tree: RunTree, spent: frozenset[int] = frozenset()) -> int | None:
    """Sequential's current kernel: in the order results arrived, each correct kernel strictly faster than the
    current one (by its own time as known now) is kept; the others are dropped (the next step revises the current
    one again). Spent kernels are passed over (the next best is revised). With nothing correct, the starter."""
    cur, key = None, None
    for k in sorted((k for k in tree.kernels.values() if k.eval_id is not None), key=lambda k: k.eval_id):
        if k.ranked and k.id not in spent:
            s = _scored(tree, k.id)
            if key is None or (s.elsewhere, s.time_ms) < key:
                cur, key = k.id, (s.elsewhere, s.time_ms)
    if cur is None:
        root = _root(tree)
        return root[0] if root else None
    return cur


def sequential(tree: RunTree, setup: SearchSetup, rnd: int, spent: frozenset[int] = frozenset()) -> Plan:
    cur = current_kernel(tree, spent)
    return Plan((cur,) if cur is not None else (), 1, 1)


def best_of_n(tree: RunTree, setup: SearchSetup, rnd: int, spent: frozenset[int] = frozenset()) -> Plan:
    s = setup.search
    if setup.first_from_reference:
        return Plan((), 1, setup.first_kernels, first=True)
    return Plan(tuple(_root(tree)), s.ideas_per_round, s.branches_per_idea)   # spent too: then the run stalls


def _related(tree: RunTree, a: int, b: int) -> bool:
    """Parent, child or sibling (same parent kernel)."""
    pa, pb = tree.parent_of(a), tree.parent_of(b)
    return pa == b or pb == a or (pa is not None and pa == pb)


def evolutionary(tree: RunTree, setup: SearchSetup, rnd: int, spent: frozenset[int] = frozenset()) -> Plan:
    s = setup.search
    pop = _correct(tree, spent)
    if not pop:
        return Plan(tuple(_root(tree)), 1, 1)
    best = min(p.time_ms for p in pop)
    children = {p.kernel_id: len(tree.ideas_of.get(p.kernel_id, [])) for p in pop}
    base = {p.kernel_id: (best / p.time_ms) ** 2 / (1 + children[p.kernel_id]) ** 0.5 + WEIGHT_FLOOR for p in pop}
    rng = random.Random(f"{s.seed}/evolutionary/{rnd}")
    left = sorted(base)
    chosen: list[int] = []
    while left and len(chosen) < s.ideas_per_round:
        weights = [base[k] * (NOVELTY_SHARE if any(_related(tree, k, c) for c in chosen) else 1.0) for k in left]
        pick = rng.choices(left, weights=weights)[0]
        chosen.append(pick)
        left.remove(pick)
    order = {s.kernel_id: n for n, s in enumerate(rank(pop))}
    chosen.sort(key=order.__getitem__)   # best first, as the idea writer's seeds are shown
    return Plan(tuple(chosen), len(chosen), 1)


PLANNERS = {"branching": branching, "sequential": sequential, "best_of_n": best_of_n, "evolutionary": evolutionary}
assert tuple(PLANNERS) == STRATEGIES


def plan(tree: RunTree, setup: SearchSetup, rnd: int, spent: frozenset[int] = frozenset()) -> Plan:
    """The round's plan under the run's strategy."""
    return PLANNERS[setup.search.strategy](tree, setup, rnd, spent)


# -- idea quality ----------------------------------------------------------------------------------------------------
def idea_key(title: str, text: str) -> str:
    """What makes two ideas the same idea: their title and text, case and spacing aside."""
    return re.sub(r"\s+", " ", f"{title}\n{text}").strip().lower()


def lineage_texts(tree: RunTree, parent: int | None) -> list[tuple[str, str]]:
    """(title, text) of every idea already tried on `parent` or on one of its ancestors, oldest first: proposing
    one of them again under `parent` would redo what its lineage has done."""
    if parent is None or parent not in tree.kernels:
        return []
    on = set(tree.path_to(parent))
    return [(i.title, i.text) for i in tree.ideas.values() if i.parent_kernel_id in on]


def lineage_ideas(tree: RunTree, parent: int | None) -> set[str]:
    """The keys (`idea_key`) of the ideas `lineage_texts` lists."""
    return {idea_key(t, x) for t, x in lineage_texts(tree, parent)}
