"""GPU leases with several (fake) devices: one timing at a time per device, devices in parallel, load spread.

CPU mode runs the interpreter, but the pool hands out leases exactly as in CUDA mode; `pool.lease_log` records
(gpu, start, end) of every timing. One batch of 6 starters on 3 devices (about 25 s on 2 cores) feeds all checks.
"""
from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

GPUS = [0, 1, 2]
N = 6


@pytest.fixture(scope="module")
def batch():
    from kernelsearch.families.softmax import STARTER

    pool = EvaluatorPool(PoolSettings(mode="cpu", gpus=GPUS, concurrency=6,
                                      evaluation=EvalSettings(trials=1, timing_iters=5)))

    async def go():
        return await asyncio.gather(*(pool.evaluate(STARTER, {"builtin": "softmax"}) for _ in range(N)))

    results = asyncio.run(go())
    return pool, results


def test_every_candidate_was_timed_under_a_lease(batch):
    pool, results = batch
    assert [r.status for r in results] == ["ok"] * N, [(r.status, r.reason) for r in results]
    assert len(pool.lease_log) == N
    assert all(g in GPUS and end > start for g, start, end in pool.lease_log)
    assert all(r.gpu_index is None for r in results)   # only CUDA mode names a device in the result


def test_timings_on_one_device_never_overlap(batch):
    pool, _ = batch
    for gpu in GPUS:
        spans = sorted((s, e) for g, s, e in pool.lease_log if g == gpu)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"two timings overlapped on device {gpu}: {spans}"


def test_different_devices_time_at_the_same_time(batch):
    pool, _ = batch
    log = pool.lease_log
    overlapping = [(a[0], b[0]) for i, a in enumerate(log) for b in log[i + 1:]
                   if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]]
    assert overlapping, f"no two devices were ever timing at once: {log}"


def test_candidates_are_spread_across_devices(batch):
    pool, _ = batch
    per_gpu = Counter(g for g, _, _ in pool.lease_log)
    assert set(per_gpu) == set(GPUS), per_gpu
    assert max(per_gpu.values()) - min(per_gpu.values()) <= 1, per_gpu


def test_pick_gpu_prefers_the_least_loaded():
    pool = EvaluatorPool(PoolSettings(mode="cpu", gpus=GPUS, concurrency=6))
    pool._load.update({0: 2, 1: 0, 2: 1})
    assert pool._pick_gpu() == 1
    pool._load.update({0: 1, 1: 1, 2: 1})
    assert pool._pick_gpu() == 0


def test_device_lease_keeps_checks_off_a_device_while_it_times():
    """Shared holders (correctness) overlap each other, never an exclusive one (timing); a waiting timing is
    not starved by a stream of new checks."""
    import asyncio

    from kernelsearch.sandbox.pool import DeviceLease

    events: list[tuple[str, str, float]] = []

    async def hold(lease, kind, name, seconds, delay=0.0):
        await asyncio.sleep(delay)
        await lease.acquire(kind)
        events.append(("start", name, asyncio.get_running_loop().time()))
        await asyncio.sleep(seconds)
        events.append(("end", name, asyncio.get_running_loop().time()))
        lease.release(kind)

    async def main():
        lease = DeviceLease()
        await asyncio.gather(hold(lease, "shared", "c1", 0.2), hold(lease, "shared", "c2", 0.2),
                             hold(lease, "exclusive", "t1", 0.1, delay=0.05),
                             hold(lease, "shared", "c3", 0.1, delay=0.1))

    asyncio.run(main())
    at = {(kind, name): t for kind, name, t in events}
    # c1 and c2 overlap (both started before either ended)
    assert max(at[("start", "c1")], at[("start", "c2")]) < min(at[("end", "c1")], at[("end", "c2")])
    # the timing starts only after both checks ended, and c3 (asked while the timing waited) after it ended
    assert at[("start", "t1")] >= max(at[("end", "c1")], at[("end", "c2")])
    assert at[("start", "c3")] >= at[("end", "t1")]


def test_one_timing_stage_at_a_time_on_a_device_beside_its_checks():
    """`timing` (held around a timing stage, whose batches are sized to the free memory) admits one holder at a time
    and keeps no check off the device; inside it the stage takes `shared` then `exclusive` as before."""
    import asyncio

    from kernelsearch.sandbox.pool import DeviceLease

    spans: dict[str, list[float]] = {}

    async def stage(lease, name, delay=0.0):
        await asyncio.sleep(delay)
        await lease.acquire("timing")
        loop = asyncio.get_running_loop()
        spans[name] = [loop.time()]
        await lease.acquire("shared")   # slots and graphs, beside checks
        await asyncio.sleep(0.05)
        lease.release("shared")
        await lease.acquire("exclusive")
        await asyncio.sleep(0.05)
        lease.release("exclusive")
        spans[name].append(loop.time())
        lease.release("timing")

    async def check(lease, name, delay):
        await asyncio.sleep(delay)
        await lease.acquire("shared")
        spans[name] = [asyncio.get_running_loop().time()]
        await asyncio.sleep(0.01)
        lease.release("shared")

    async def main():
        lease = DeviceLease()
        await asyncio.gather(stage(lease, "a"), stage(lease, "b", 0.01), check(lease, "c", 0.02))

    asyncio.run(main())
    assert spans["b"][0] >= spans["a"][1]                          # the second stage waited for the first
    assert spans["c"][0] < spans["a"][1]                           # a check ran while the first stage held `timing`


@pytest.mark.parametrize("early", [True, False])
def test_the_timing_stages_shared_part_drains_the_device_beside_it(early):
    """`prep` (a timing stage's shared part: the pool asks it for a judge holding `timing`) is admitted beside a
    check in progress; with early drain no new check starts from then until `timing` is released, so the exclusive
    loop starts as soon as the check in progress ends. Without it (the old way) a check asked during the prep runs,
    and the loop waits for it as well."""
    from kernelsearch.sandbox.pool import DeviceLease

    at: dict[str, float] = {}

    async def check(lease, name, delay, seconds):
        await asyncio.sleep(delay)
        await lease.acquire("shared")
        at[name + "+"] = asyncio.get_running_loop().time()
        await asyncio.sleep(seconds)
        at[name + "-"] = asyncio.get_running_loop().time()
        lease.release("shared")

    async def stage(lease):
        await asyncio.sleep(0.02)
        loop = asyncio.get_running_loop()
        await lease.acquire("timing")
        await lease.acquire("prep")
        at["prep+"] = loop.time()
        await asyncio.sleep(0.1)
        lease.release("prep")
        await lease.acquire("exclusive")
        at["loop+"] = loop.time()
        await asyncio.sleep(0.05)
        lease.release("exclusive")
        lease.release("timing")
        at["timing-"] = loop.time()

    async def main():
        lease = DeviceLease(early_drain=early)
        await asyncio.gather(check(lease, "old", 0.0, 0.15), stage(lease), check(lease, "new", 0.05, 0.2))

    asyncio.run(main())
    assert at["prep+"] < at["old-"]                          # the prep ran beside the check in progress
    assert at["loop+"] >= at["old-"]                         # the loop waited for it to end
    if early:
        assert at["new+"] >= at["timing-"]                   # no check started while the stage held the device
        assert at["loop+"] - at["old-"] < 0.08   # the loop began once the old check ended (the new one: +0.1)
    else:
        assert at["new+"] < at["prep+"] + 0.1                # a check asked during the prep started during it
        assert at["loop+"] >= at["new-"]                     # and the loop waited for it too


def test_without_the_early_drain_the_prep_waits_behind_a_waiting_exclusive_as_a_shared_hold_did():
    """KS_CLOCK_EARLY_DRAIN=0 (and every CPU pool) is the old way: the timing stage's shared part queues behind
    another evaluation's waiting exclusive hold (a stability check), as its shared request did before `prep`."""
    from kernelsearch.sandbox.pool import DeviceLease

    at: dict[str, float] = {}

    async def hold(lease, kind, name, delay, seconds):
        await asyncio.sleep(delay)
        await lease.acquire(kind)
        at[name] = asyncio.get_running_loop().time()
        await asyncio.sleep(seconds)
        lease.release(kind)

    async def main(early):
        lease = DeviceLease(early_drain=early)
        await lease.acquire("timing")   # the prep's judge holds `timing`
        await asyncio.gather(hold(lease, "shared", "check", 0.0, 0.1), hold(lease, "exclusive", "stab", 0.02, 0.05),
                             hold(lease, "prep", "prep", 0.04, 0.01))
        lease.release("timing")

    asyncio.run(main(False))
    assert at["prep"] >= at["stab"]        # the old way: behind the waiting exclusive
    asyncio.run(main(True))
    assert at["prep"] < at["stab"]         # the early drain: beside the check in progress, ahead of it
