"""The quiet-device probe (judge/clock.py, each timed batch): a short sleep kernel on the judge's own context, timed
by the host from its launch to its end. Where another context holds the device the probe waits for its time slice,
so a probe that takes too long says the device is shared. `settle_device` waits for quiet at a batch's start (never a
verdict); `quiet_device`, before each side's batch, tells a candidate's kernel left running (rejected) from another
process's work (harness_error)."""
from __future__ import annotations

import time

import torch

from kernelsearch.judge.conversation import Conversation
from kernelsearch.judge.status import CandidateFailure, HarnessFailure, Status

PROBE_MS = 0.1                 # the quiet-device probe: a sleep kernel this long at the device's highest clock
# a probe whose host wall time (launch to end) is over PROBE_SLACK x its length and 0.05 ms more shared the device.
# H100, 40 probes of 0.1 ms: idle median 0.115 ms; beside a process spinning sleep kernels 0.265-0.323 ms (the
# contexts time-slice); the least of three probes is taken, so host jitter alone (an idle outlier read 0.58) is not
PROBE_SLACK = 1.5
PROBE_BUSY_MS = PROBE_SLACK * PROBE_MS + 0.05   # the least of three probes over this: the device is shared
# (Replies waited for by polling instead of asleep were dropped: H200, clock_spread_gpu.py, 8192 x 8191 fp32 softmax,
# 3 evaluations each: 0.1934-0.1940 ms asleep (0.34 %), 0.1954-0.2011 ms with 50 ms of polling (2.89 %).)
PROBE_TRIES = 20               # re-probed every 50 ms before the device counts as busy


def is_candidate(name: str) -> bool:
    """A timing side that runs candidate code: "candidate", and a re-timing group's "candidate#1", "candidate#2"."""
    return name.startswith("candidate")


def _probe_ms() -> float:
    """A sleep kernel of PROBE_MS at the device's highest clock on the judge's own context: the host's wall time
    from its launch to its end. The wall time, not the kernel's event time: where another context holds the device,
    the probe waits for its time slice before it starts, and its events (which run in the probe's own slice) would
    not see the wait (H100: a spinning helper process slowed the reference's batches 5x while a 0.1 ms probe's events
    read 0.1 ms)."""
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * PROBE_MS)   # clock_rate: kHz, cycles a ms
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def settle_device() -> int:
    """Wait for a quiet device (the probe of `quiet_device`), at most PROBE_TRIES probes 50 ms apart; how many
    read busy. Never a verdict: at a batch's start a busy device can be another process's work (the references'
    batches are probed again, with a verdict, by `quiet_device`). The clock calls it at each batch's start, before
    its inputs are written (so a candidate's own work left running gains nothing from the wait): other evaluations'
    work outside any lease (a warm-up's allocations and fills, judge/harness.py `_warm`) would otherwise run inside
    a side's batch (one evaluation of 8 on an H100 read 14-15 % apart between its batches, 2026-12-06). Its switch
    KS_CLOCK_SETTLE was removed on 2026-12-08, once measured (README: 22.1 evaluations a minute with it, 21.5
    without; the repeat pairs 0.05 % against 0.60-1.72 %)."""
    for busy in range(PROBE_TRIES):
        if min(_probe_ms() for _ in range(3)) <= PROBE_BUSY_MS:
            return busy
        time.sleep(0.05)
    return PROBE_TRIES


def quiet_device(talk: Conversation, sides: dict | None = None) -> None:
    """Before each side's timed batch: the device runs nothing but the judge's work. SIGSTOP freezes the
    candidate's host threads, not kernels it left on the device, and a kernel of another process time-slices with
    the reference's batch, so a candidate that leaves one spinning reads faster than it is. A probe kernel on the
    judge's context waits for its time slice where another context shares the device. Re-probed for a second (work
    that was finishing: a kernel in flight when the candidate was frozen ends, and the reference is timed on a quiet
    device, so it gains nothing); still busy, the candidate's processes are killed and the device probed again: quiet
    then, it was the candidate's (rejected, `GPU check`); still busy, it is another process's, and the timing is not
    the candidate's to be charged for (harness_error)."""
    for _ in range(PROBE_TRIES):
        took = min(_probe_ms() for _ in range(3))
        if took <= PROBE_BUSY_MS:
            return
        time.sleep(0.05)
    for name, r in (sides or {"candidate": talk.cand}).items():
        if is_candidate(name):
            r.kill()
    time.sleep(0.2)
    took_after = min(_probe_ms() for _ in range(3))
    if took_after <= PROBE_BUSY_MS:
        raise CandidateFailure(Status.rejected, f"GPU check: the device was busy while the candidate was frozen (a "
                               f"{PROBE_MS:.2f} ms probe took {took:.2f} ms before a timed batch, and "
                               f"{took_after:.2f} ms once the candidate's processes were killed): work of the "
                               "candidate's kept running to slow the reference", stage="timing")
    raise HarnessFailure(f"the device was busy with another process's work during the timing (a {PROBE_MS:.2f} ms "
                         f"probe took {took_after:.2f} ms with the candidate's processes killed)", stage="timing")
