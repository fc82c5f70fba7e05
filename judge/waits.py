"""Where an evaluation's wall time goes while other evaluations hold the device: its lease, counted."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, ContextManager


def counted(lease: Callable[[str], ContextManager], judge) -> Callable[[str], ContextManager]:
    """`lease`, with the time spent waiting for each kind summed into `judge.detail["stage_s"]` (`wait_shared`,
    `wait_exclusive`, `wait_timing`), the longest hold of each (`hold_max_*`), and the step that held it longest
    (`detail["longest_hold"]`: the judge's function that asked and its last memory step): a timing waiting for the
    device waits, at worst, for another evaluation's longest hold. `detail["waits"]` splits the waits by the step that
    asked (`kind:step` -> [leases taken, seconds waited]): which step's leases an evaluation queues behind."""
    @contextlib.contextmanager
    def counted_lease(kind: str, step: str | None = None):
        t0 = time.perf_counter()
        caller = step or sys._getframe(2).f_code.co_name   # the judge's step that asked (here <- __enter__ <- it)
        with lease(kind):
            st = judge.detail.setdefault("stage_s", {})
            t1 = time.perf_counter()
            st[f"wait_{kind}"] = round(st.get(f"wait_{kind}", 0.0) + t1 - t0, 3)
            n, waited = judge.detail.setdefault("waits", {}).get(f"{kind}:{caller}", (0, 0.0))
            judge.detail["waits"][f"{kind}:{caller}"] = [n + 1, round(waited + t1 - t0, 3)]
            try:
                yield
            finally:
                held = time.perf_counter() - t1
                if held > st.get(f"hold_max_{kind}", 0.0):
                    st[f"hold_max_{kind}"] = round(held, 3)
                    judge.detail.setdefault("longest_hold", {})[kind] = f"{caller}: {judge.mem.doing}"
    return counted_lease
