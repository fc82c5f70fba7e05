"""Replay the timing loop's stopping rule on timing plans a GPU recorded (bench_harness.py --save), on the CPU.

For every evaluation that ran all its batches (12), with outputs described once, the batches are taken in random
orders and the loop's rule is applied as they come: stop after MIN_BATCHES once the per-call times agree within the
target spread (judge/clock.py), and, under each SIDE_SETTLED tried, once the side steps add at most that fraction of
the figure (charges.side_settled). Printed per threshold: the figure's distance from the candidate's own event time
(its device time: its word, honest in these plans), mean, 90th percentile and largest, and the batches used.

    python3 bench/clock_stop_replay.py /work/.device/*/*.jsonl
"""
from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelsearch.judge import charges  # noqa: E402

MIN_BATCHES, TARGET = 4, 0.02


def batches(plan: dict):
    """Per batch: (candidate wall s, its own overhead s or None, eager overhead s, side step s, candidate events s)."""
    raw, n = plan.get("batches_ms") or {}, plan.get("calls_per_batch")
    cand, eager = raw.get("candidate") or {}, raw.get("eager") or {}
    if not n or not plan.get("described_once") or not cand.get("wall_ms") or not eager.get("wall_ms"):
        return None, None
    rows = []
    for w, e, ew, ee, s in zip(cand["wall_ms"], cand["events_ms"], eager["wall_ms"], eager["events_ms"],
                               plan.get("side_steps_ms") or []):
        own = (w - e) / 1e3 if isinstance(e, (int, float)) and 0 < e <= w else None
        rows.append((w / 1e3, own, (ew - ee) / 1e3, s / 1e3, e / 1e3 if isinstance(e, (int, float)) else None))
    return rows, n


def run(rows, n: int, fixed: float, settled: float | None):
    """The loop's stop on `rows` in their order (charges.side_settled at `settled`; None: the spread alone):
    (figure ms, events ms, batches used)."""
    charges.SIDE_SETTLED = settled if settled is not None else float("inf")
    for k in range(MIN_BATCHES, len(rows) + 1):
        walls, owns, refs, sides, evs = zip(*rows[:k])
        per = charges.batch_times(list(walls), list(owns), list(refs), fixed, n)
        if k == len(rows) or charges.spread(per) <= TARGET and charges.side_settled(per, list(sides), n):
            events = charges.low([e * 1e3 / n for e in evs if e is not None])
            return charges.candidate_figure(per, list(sides), n)[1], events, k
    raise AssertionError("unreachable")


def main(paths: list[str]) -> int:
    evaluations = []
    for p in paths:
        for line in open(p):
            r = json.loads(line) if line.strip() else {}
            plan = (r.get("detail") or {}).get("timing_plan") or {}
            rows, n = batches(plan)
            if r.get("status") == "ok" and rows and len(rows) >= 12:
                evaluations.append((rows, n, (plan.get("fixed_ms") or 0.0) / 1e3))
    print(f"{len(evaluations)} evaluations of 12 batches, outputs described once, each in 100 random batch orders")
    for settled in (None, 0.01, 0.005, 0.0025):
        rng, devs, used = random.Random(1), [], []
        for rows, n, fixed in evaluations:
            for _ in range(100):
                order = rows[:]
                rng.shuffle(order)
                figure, events, k = run(order, n, fixed, settled)
                devs.append(abs(figure - events) / events * 100)
                used.append(k)
        devs.sort()
        print(f"  side steps settled at {'-' if settled is None else settled:>6}: distance from its events mean "
              f"{statistics.mean(devs):.2f} %, p90 {devs[int(0.9 * len(devs))]:.2f} %, largest {devs[-1]:.2f} %; "
              f"batches {statistics.mean(used):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
