"""A run's clock: one reference figure per device, each kernel's own time, and the ranking by that time.

Every evaluation times the reference and the candidate side by side (judge/clock.py) and stores both, with their
ratio (`Evaluation.speedup`). That ratio is an honest measurement of one evaluation, but its denominator moves
from one evaluation to the next (on the CPU interpreter one run's reference read 0.085-0.763 ms over its 12
evaluations), so ranking kernels by it picks the one whose reference happened to read slow. Here instead:

- **the run's reference figure** on a device is the median of the reference times (`ref_time_ms`; for
  torch.compile `compile_ref_time_ms`) that the run's evaluations measured on that device, re-timings included and
  whatever their status. Every evaluation still times the reference, so the figure is re-measured at every
  evaluation and follows drift; early in a run it rests on few evaluations (the starter's alone at first), which
  moves every speedup of the run alike and never the order of its kernels.
- **a kernel's time** on a device is the median of its ok timings there: its evaluation's and its re-timings'
  (the controller re-times the finalists before a round's seeds are chosen and before the run finishes).
- **every speedup** the run shows is its reference figure over the kernel's time; kernels are **ranked by their
  own time** on the run's device (that of its latest ok timing), never by a ratio. A kernel timed only on another
  device (a run resumed elsewhere) ranks after those timed on it.
- a kernel a re-timing found not ok (not `harness_error`, which is the judge's own failure) is not ranked: the
  re-timing is a full evaluation on fresh inputs, so it is a second correctness check the kernel failed.

`reference_ms` and `run_clock` reduce the same rows with the same function, so the figure is defined once.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional

from sqlmodel import Session, select

from kernelsearch.store.models import Evaluation, Kernel
from kernelsearch.store.status import Status

RETIME = "retime"                        # Evaluation.purpose of a re-timing; None: the kernel's own evaluation
JUDGED = Evaluation.purpose.is_(None)    # the kernel's evaluation, its verdict (one a kernel; NULL in older rows)
_OK = Status.ok.value
_NOT_FAILED = (Status.ok.value, Status.harness_error.value, Status.unverified.value)
_COLUMNS = (Evaluation.kernel_id, Evaluation.purpose, Evaluation.status, Evaluation.device, Evaluation.time_ms,
            Evaluation.ref_time_ms, Evaluation.compile_ref_time_ms)


@dataclass(frozen=True)
class Reference:
    """A run's reference figure on one device: medians, and how many evaluations each is over."""

    device: Optional[str]
    eager_ms: Optional[float]
    eager_n: int
    compile_ms: Optional[float] = None
    compile_n: int = 0


@dataclass(frozen=True)
class KernelTime:
    """A kernel's own time: the median of its ok timings on one device."""

    device: Optional[str]
    time_ms: float
    timings: int
    spread: float = 0.0   # (slowest - fastest) / time_ms over those timings: how far they agree


@dataclass
class RunClock:
    """One run's timings, read once (`run_clock`): the reference figures, each correct kernel's time, its
    re-timings. Speedups and the ranking are read from here."""

    device: Optional[str] = None                                      # the device kernels are ranked on
    references: dict[Optional[str], Reference] = field(default_factory=dict)
    times: dict[int, KernelTime] = field(default_factory=dict)        # kernels whose evaluation is ok
    retimes: dict[int, int] = field(default_factory=dict)             # kernel -> re-timing rows, any status
    failed: dict[int, str] = field(default_factory=dict)              # kernel -> a failed re-timing's status

    def reference(self, device: Optional[str]) -> Optional[Reference]:
        return self.references.get(device)

    def speedup(self, kernel_id: int, *, compile: bool = False) -> Optional[float]:
        """The run's reference figure over the kernel's time, on the kernel's device; None if either is missing."""
        t = self.times.get(kernel_id)
        ref = self.references.get(t.device) if t else None
        ms = (ref.compile_ms if compile else ref.eager_ms) if ref else None
        return ms / t.time_ms if ms is not None and t.time_ms > 0 else None

    def is_ranked(self, kernel_id: int) -> bool:
        """Correct, timed, and no re-timing found it wrong."""
        return kernel_id in self.times and kernel_id not in self.failed

    def rank_key(self, kernel_id: int) -> tuple:
        """Fastest first on the run's device (kernels timed only elsewhere after), ties to the older kernel."""
        t = self.times[kernel_id]
        return (t.device != self.device, t.time_ms, kernel_id)

    def ranked(self, kernel_ids: Optional[Iterable[int]] = None) -> list[int]:
        """The ranked kernels (of `kernel_ids`, or all), fastest first."""
        ids = self.times if kernel_ids is None else kernel_ids
        return sorted((k for k in ids if self.is_ranked(k)), key=self.rank_key)


def _figure(rows: Iterable[tuple], device: Optional[str]) -> Reference:
    """The reference figure of `device` from timing rows (`_COLUMNS`): the one definition of it."""
    eager = [r[5] for r in rows if r[3] == device and r[5] is not None]
    comp = [r[6] for r in rows if r[3] == device and r[6] is not None]
    return Reference(device, statistics.median(eager) if eager else None, len(eager),
                     statistics.median(comp) if comp else None, len(comp))


def _rows(session: Session, *where) -> list[tuple]:
    stmt = (select(*_COLUMNS).join(Kernel, Kernel.id == Evaluation.kernel_id).where(*where)
            .order_by(Evaluation.id))
    return list(session.connection().execute(stmt))


def reference_ms(session: Session, run_id: int, device: Optional[str], *, compile: bool = False) -> Optional[float]:
    """The run's reference time on `device`: the median of the reference times its evaluations measured there
    (torch.compile's with `compile`); None before any."""
    on = Evaluation.device.is_(None) if device is None else Evaluation.device == device
    ref = _figure(_rows(session, Kernel.run_id == run_id, on), device)
    return ref.compile_ms if compile else ref.eager_ms


def run_clock(session: Session, run_id: int) -> RunClock:
    """The run's clock, from every evaluation row of the run (one query)."""
    return clock_of(_rows(session, Kernel.run_id == run_id))


def clock_of(rows: list[tuple]) -> RunClock:
    """A RunClock from timing rows (`_COLUMNS`, in the order written)."""
    c = RunClock()
    verdict: dict[int, tuple[str, Optional[str]]] = {}
    ok: dict[int, dict[Optional[str], list[float]]] = defaultdict(lambda: defaultdict(list))
    devices: dict[Optional[str], None] = {}
    for kid, purpose, status, device, time_ms, ref_ms, comp_ms in rows:
        if ref_ms is not None or comp_ms is not None:
            devices.setdefault(device)
        if purpose is None:
            verdict[kid] = (status, device)
        else:
            c.retimes[kid] = c.retimes.get(kid, 0) + 1
            if status not in _NOT_FAILED and kid not in c.failed:
                c.failed[kid] = status
        if status == _OK and time_ms is not None:
            ok[kid][device].append(time_ms)
            c.device = device   # the latest ok timing's device
    c.references = {d: _figure(rows, d) for d in devices}
    for kid, (status, device) in verdict.items():
        if status != _OK or not ok.get(kid):
            continue
        by_device = ok[kid]
        dev = c.device if c.device in by_device else device if device in by_device else next(iter(by_device))
        times = by_device[dev]
        mid = statistics.median(times)
        c.times[kid] = KernelTime(dev, mid, len(times), (max(times) - min(times)) / mid if mid > 0 else 0.0)
    return c
