"""Finalists re-timed side by side (judge/group.py) against re-timed alone, on one GPU (issue 30).

For each family's starter, the same kernel is re-timed `--repeats` times as a group of `--size` copies
(EvaluatorPool.retime_group: one evaluation, one timing stage, the copies' batches interleaved) and `--repeats` x
`--size` times alone (EvaluatorPool.evaluate in re-timing mode), at `--concurrency`; then, per family and mode:
  - the kernel's readings: min-max spread over all of them (the same code: ideally 0);
  - within a group: the mean min-max spread of the copies timed in one stage (alone: of each run of `--size`);
  - the reference's readings: spread over the evaluations;
  - wall seconds per re-timing, from the first start to the last result;
and, for the ranking a search makes, the starter against a variant from the family's space (bench_harness.py's
second candidate): `--repeats` pairs timed as a group of two and as two lone re-timings, and the spread of the
variant's time over the starter's across the repeats (the ratio a seed choice reads: ideally the same every time).
Every failure is printed with its status and reason. A fresh pool per mode: its first evaluation starts the fork
server, so the figures include a cold start, as a user's first run does.

    . bench/device_env.sh && python3 bench/retime_group_gpu.py [--repeats 4] [--size 3] [--families softmax,rmsnorm]
    python3 bench/retime_group_gpu.py --cpu --repeats 1   # a smoke check on the interpreter: not GPU figures
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time


def _say(*a) -> None:
    print(*a, flush=True)


def _spread(v: list[float]) -> float:
    return (max(v) - min(v)) / statistics.median(v) if len(v) > 1 and statistics.median(v) > 0 else float("nan")


async def _measure(pool, source: str, ref: dict, repeats: int, size: int, grouped: bool) -> dict:
    t0 = time.monotonic()
    if grouped:
        batches = await asyncio.gather(*(pool.retime_group([source] * size, ref) for _ in range(repeats)))
    else:
        flat = await asyncio.gather(*(pool.evaluate(source, ref, retime=True) for _ in range(repeats * size)))
        batches = [flat[i:i + size] for i in range(0, len(flat), size)]
    wall = time.monotonic() - t0
    times, refs, within, failed = [], [], [], 0
    for batch in batches:
        ok = [r for r in batch if r is not None and r.status == "ok"]
        for r in batch:
            if r is None or r.status != "ok":
                failed += 1
                _say(f"    not ok: {None if r is None else (r.status, r.reason)}")
            elif grouped and r.detail.get("retime_group") != size:
                _say(f"    timed alone after its group failed: {r.time_ms:.5f} ms")
        times += [r.time_ms for r in ok]
        refs += [r.ref_time_ms for r in ok]
        if len(ok) > 1:
            within.append(_spread([r.time_ms for r in ok]))
    return {"n": len(times), "failed": failed, "median_ms": statistics.median(times) if times else float("nan"),
            "spread": _spread(times), "within": statistics.mean(within) if within else float("nan"),
            "ref_spread": _spread(refs), "s_each": wall / max(1, repeats * size)}


async def _pairs(pool, a: str, b: str, ref: dict, repeats: int, grouped: bool) -> list[float]:
    """b's time over a's, a repeat each (None-free: a repeat with a failure is left out, and said)."""
    if grouped:
        pairs = await asyncio.gather(*(pool.retime_group([a, b], ref) for _ in range(repeats)))
    else:
        flat = await asyncio.gather(*(pool.evaluate(src, ref, retime=True) for _ in range(repeats) for src in (a, b)))
        pairs = [flat[i:i + 2] for i in range(0, len(flat), 2)]
    ratios = []
    for ra, rb in pairs:
        if ra is None or rb is None or ra.status != "ok" or rb.status != "ok":
            _say(f"    pair not ok: {[None if r is None else (r.status, r.reason) for r in (ra, rb)]}")
            continue
        ratios.append(rb.time_ms / ra.time_ms)
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--size", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--families", default="softmax,rmsnorm")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    if args.cpu:
        os.environ["TRITON_INTERPRET"] = "1"
    import importlib

    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    mode = "cpu" if args.cpu else "cuda"
    rows, ratio_rows = [], []
    for family in args.families.split(","):
        source = importlib.import_module(f"kernelsearch.families.{family}").STARTER
        for grouped in (True, False):
            pool = EvaluatorPool(PoolSettings(mode=mode, gpus=[0], concurrency=args.concurrency,
                                              evaluation=EvalSettings(trials=1)))
            label = f"{family} {'group of ' + str(args.size) if grouped else 'alone'}"
            _say(f"{label}: {args.repeats} x {args.size} re-timings on {mode} ...")
            try:
                row = asyncio.run(_measure(pool, source, {"builtin": family}, args.repeats, args.size, grouped))
            finally:
                pool.close()
            _say(f"  {row}")
            rows.append((label, row))
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_harness import _candidates

        cands = _candidates(family, 2)
        if len(cands) < 2:
            _say(f"  {family}: no variant to pair the starter with")
            continue
        (_, a), (vlabel, b) = cands[:2]
        _say(f"{family}: the starter against {vlabel}")
        for grouped in (True, False):
            pool = EvaluatorPool(PoolSettings(mode=mode, gpus=[0], concurrency=args.concurrency,
                                              evaluation=EvalSettings(trials=1)))
            label = f"{family}, {'group of 2' if grouped else 'alone'}"
            try:
                ratios = asyncio.run(_pairs(pool, a, b, {"builtin": family}, args.repeats, grouped))
            finally:
                pool.close()
            _say(f"  {label}: ratios {[round(r, 4) for r in ratios]}")
            ratio_rows.append((label, ratios))
    _say(f"\n{'mode':<24}{'ok':>4}{'fail':>5}{'median ms':>11}{'spread':>9}{'in group':>10}{'ref spr':>9}"
         f"{'s each':>8}  ({mode}{': not GPU figures' if args.cpu else ''})")
    for label, r in rows:
        _say(f"{label:<24}{r['n']:>4}{r['failed']:>5}{r['median_ms']:>11.5f}{r['spread']:>9.2%}{r['within']:>10.2%}"
             f"{r['ref_spread']:>9.2%}{r['s_each']:>8.2f}")
    _say(f"\n{'variant / starter':<44}{'n':>3}{'median':>9}{'spread':>9}")
    for label, ratios in ratio_rows:
        med = statistics.median(ratios) if ratios else float("nan")
        _say(f"{label:<44}{len(ratios):>3}{med:>9.4f}{_spread(ratios):>9.2%}")
    return 0 if all(r["failed"] == 0 for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
