"""Whose failure a judge's death is: the harness's (not charged, the kernel queued again) or the candidate's.

A candidate gains from a verdict of harness_error (uncharged, retried), so the pool gives it only where the candidate
could not have caused the death: the judge SIGKILLed while the candidate's runner was alive, the kernel's OOM killer
active meanwhile, and the runner a user of its own (it cannot signal the judge). Candidates' processes make
themselves the OOM killer's first choice (judge/isolation.confine_candidate).
"""
from __future__ import annotations

import asyncio
import contextlib
import signal


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (Linux's /proc/vmstat), or None."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/vmstat") as f:
        return int(next(ln for ln in f if ln.startswith("oom_kill ")).split()[1])
    return None


async def judge_killed_outside(exits: list[asyncio.Future], kills_before: int | None,
                                isolated: bool) -> tuple[str | None, str | None]:
    """How the judge ended when its result pipe closed with no result, before the timeout and the pool's kill:
    (harness_error's reason, None) where the judge was killed by SIGKILL while the candidate's runner (exits[0]) was
    alive, the kernel's OOM killer killed a process meanwhile, and the candidate could not have sent the signal (its
    runner has a user of its own); else (None, the crash's reason or None). A candidate that keeps the pool's user can
    signal the judge, so a judge killed then is the candidate's crash: a wrong kernel must not turn its verdict into
    the harness's uncharged failure by killing the judge (fixture round3/kill_judge)."""
    try:
        rc = await asyncio.wait_for(asyncio.shield(exits[-1]), timeout=5)
    except Exception:  # noqa: BLE001 - not known: judged as before
        return None, None
    if rc != -signal.SIGKILL or exits[0].done():
        return None, None
    now = oom_kills()
    oom = kills_before is not None and now is not None and now > kills_before
    if oom and isolated:
        return (f"the judge was killed (SIGKILL) while the candidate's process was alive, before the timeout, and the "
                f"host's OOM-kill count rose by {now - kills_before}: the harness's failure, not the candidate's (the "
                f"kernel's OOM killer; the candidate's user could not signal the judge)"), None
    why = ("the host's OOM-kill count rose, but " if oom else "") + (
        "the candidate's process keeps the pool's user and could signal it" if not isolated
        else "the OOM-kill count did not change")
    return None, (f"the judge was killed (SIGKILL) while the candidate's process was alive, before the timeout: "
                  f"charged to the candidate ({why})")
