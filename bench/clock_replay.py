"""Replay the clock's charges on timing plans a GPU recorded (bench_harness.py --save): each evaluation's per-batch
walls and CUDA-event times (timing_plan.batches_ms) and side steps, charged again under other rules, on the CPU. It
tells, without device time, how much of the spread between evaluations of one kernel each charge adds: the
candidate's own events (its word: never charged, shown for comparison), the credit cap (the reference's per-batch
overhead: `low`, the fastest half's median, as judge/charges.py, or its 75th percentile), and the side steps
(`batch` as charges.py, `median`, or none).

    python3 bench/clock_replay.py /work/.device/6/harness_0.jsonl [more.jsonl ...]
"""
from __future__ import annotations

import json
import statistics
import sys

from kernelsearch.judge import charges


def _q(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


CAPS = {"low": charges.low, "median": statistics.median, "p75": lambda v: _q(v, 0.75)}


def figures(plan: dict) -> dict[str, float] | None:
    """The candidate's figure (ms a call) under each rule, from one evaluation's timing plan."""
    raw, n = plan.get("batches_ms") or {}, plan.get("calls_per_batch")
    cand, eager = raw.get("candidate") or {}, raw.get("eager") or {}
    if not n or not cand.get("wall_ms") or not eager.get("wall_ms"):
        return None
    fixed = (plan.get("fixed_ms") or 0.0) / 1e3
    cw = [w / 1e3 for w in cand["wall_ms"]]
    ce = [e / 1e3 if isinstance(e, (int, float)) else None for e in cand["events_ms"]]
    ref_ov = [w / 1e3 - e / 1e3 for w, e in zip(eager["wall_ms"], eager["events_ms"])]
    owns = [w - e if e is not None and 0 < e <= w else None for w, e in zip(cw, ce)]
    side = [s / 1e3 for s in plan.get("side_steps_ms") or []]
    # the pings' part of the side steps alone: what is left where the describe step goes (outputs described once,
    # at capture, and the candidate frozen at its batch's reply)
    pp = plan.get("pings_ms") or []
    pings = [(p.get("candidate", 0.0) - p.get("eager", 0.0)) / 1e3 for p in pp]
    # the pings against the reference's pings in the same place of a batch (first after the refill, or after another
    # side's batch): the sides alternate, and whichever goes first pings ~0.1-0.2 ms slower (H100, 2026-12-07)
    first = [p.get("eager", 0.0) for i, p in enumerate(pp) if i % 2 == 1]
    later = [p.get("eager", 0.0) for i, p in enumerate(pp) if i % 2 == 0]
    placed = [(p.get("candidate", 0.0) - statistics.median(first if i % 2 == 0 else later)) / 1e3
              for i, p in enumerate(pp)] if first and later else []
    out = {"events": charges.low([e * 1e3 / n for e in ce if e is not None])}
    for cap_name, cap_of in CAPS.items():
        cap = min(max(cap_of(ref_ov), fixed), fixed + charges.GRAPH_LAUNCH_CAP)
        per = [max(w - (cap if o is None else min(cap, max(o, fixed))), 0.0) * 1e3 / n for w, o in zip(cw, owns)]
        out[f"cap {cap_name}, no side"] = charges.low(per)
        # a candidate whose runner forges its events (reports none spent): every batch credited the whole cap
        out[f"cap {cap_name}, forged"] = charges.low([max(w - cap, 0.0) * 1e3 / n for w in cw])
        for how in ("batch", "median"):
            if side:
                out[f"cap {cap_name}, side {how}"] = charges.candidate_figure(per, side, n, how=how)[1]
        if pings:
            out[f"cap {cap_name}, pings batch"] = charges.candidate_figure(per, pings, n, how="batch")[1]
        if placed:
            out[f"cap {cap_name}, placed batch"] = charges.candidate_figure(per, placed, n, how="batch")[1]
            out[f"cap {cap_name}, placed median"] = charges.candidate_figure(per, placed, n, how="median")[1]
    return out


def main(paths: list[str]) -> int:
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    groups: dict[str, list[dict]] = {}
    for r in rows:   # the repeats of one starter (label "<family> repeat <i>"), one group per file and family
        if " repeat " in r.get("label", "") and r.get("status") == "ok":
            groups.setdefault(r["label"].split(" repeat ")[0], []).append(r)
    for fam, reps in groups.items():
        figs = [f for f in (figures((r.get("detail") or {}).get("timing_plan") or {}) for r in reps) if f]
        if not figs:
            print(f"{fam}: no per-batch figures (saved before timing_plan.batches_ms existed?)")
            continue
        print(f"\n{fam}: {len(figs)} evaluations, us a call; spread = (max - min) / min")
        diffs = {0: [], 1: []}   # the candidate's ping less the eager's, by the batch's parity (who went first)
        for r in reps:
            for i, p in enumerate(((r.get("detail") or {}).get("timing_plan") or {}).get("pings_ms") or []):
                diffs[i % 2].append(p.get("candidate", 0.0) - p.get("eager", 0.0))
        if diffs[0] and diffs[1]:
            print(f"  pings, candidate less eager, median ms: candidate first {statistics.median(diffs[0]):+.3f}, "
                  f"eager first {statistics.median(diffs[1]):+.3f}")
        reported = [r.get("time_ms") for r in reps if r.get("time_ms")]
        lines = {"reported": reported, **{k: [f[k] for f in figs if k in f] for k in figs[0]}}
        for k, v in lines.items():
            if v:
                spread = (max(v) - min(v)) / min(v) * 100
                print(f"  {k:24s} " + " ".join(f"{x * 1000:8.2f}" for x in v)
                      + f"   spread {spread:5.2f} %   median {statistics.median(v) * 1000:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
