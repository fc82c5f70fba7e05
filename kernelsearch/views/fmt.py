"""Formatting shared by the terminal views and the HTML report: speedups, times, tokens, cost."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Optional

from kernelsearch.store import queries as q

CPU_KIND = "cpu-interpreter"


def strategy(run) -> str:
    """The search strategy a run was made with, from its config snapshot (runs made before strategies: branching,
    the only search there was); "?" for a snapshot that is not JSON."""
    try:
        return (json.loads(run.config_json).get("search") or {}).get("strategy") or "branching"
    except (TypeError, ValueError, AttributeError):
        return "?"

def x(v: Optional[float]) -> str:
    if v is None:
        return "—"
    return f"{v:.2g}×" if v < 0.1 else f"{v:.2f}×" if v < 100 else f"{v:.0f}×"


def pct(v: Optional[float]) -> str:
    return "—" if v is None else f"{v * 100:.0f}%"


def ms(v: Optional[float]) -> str:
    if v is None:
        return "—"
    if v >= 1000:
        return f"{v / 1000:.3g} s"
    if v >= 1:
        return f"{v:.3g} ms"
    return f"{v * 1000:.3g} µs"


def timed(time_ms: Optional[float], timings: int) -> str:
    """A kernel's own time, with how many timings it is the median of (store/clock.py)."""
    if time_ms is None:
        return "—"
    return ms(time_ms) + (f", median of {timings}" if timings > 1 else "")


def reference_line(st: q.RunStats) -> Optional[str]:
    """The run's reference figure in a line: what every speedup it shows is over."""
    if st.reference_ms is None:
        return None
    return (f"reference: eager {ms(st.reference_ms)} on {st.device or 'an unknown device'}, the median of "
            f"{st.reference_timings} evaluation{'s' if st.reference_timings != 1 else ''}' side-by-side timings; "
            "speedups are it over each kernel's own time (the median of its timings)"
            + (f"; {st.retimes} re-timing{'s' if st.retimes != 1 else ''} of finalists" if st.retimes else ""))


def dur(s: Optional[float]) -> str:
    if s is None:
        return "—"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    if n >= 1000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def cost(c: float) -> str:
    return f"${c:.2f}" if c >= 0.1 or c == 0 else f"${c:.4f}"


def cost_of(st: q.RunStats) -> str:
    """The run's cost; calls whose model had no price are counted, not guessed."""
    if st.llm_calls and st.unpriced_calls == st.llm_calls:
        return f"unpriced ({st.llm_calls} calls)"
    return cost(st.cost_usd) + (f" +{st.unpriced_calls} unpriced" if st.unpriced_calls else "")


def one_line(s: Optional[str], n: int = 120) -> str:
    if not s:
        return ""
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def when(d: Optional[datetime]) -> str:
    return d.strftime("%Y-%m-%d %H:%M:%S") if d else "—"


def by_status(by_status: dict[str, int], queued: int = 0) -> str:
    order = [s for s in q.STATUSES if by_status.get(s)] + sorted(s for s in by_status if s not in q.STATUSES)
    parts = [f"{by_status[s]} {s}" for s in order]
    if queued:
        parts.append(f"{queued} queued")
    return " · ".join(parts) if parts else "none"


def timing_note(kinds: list[str]) -> Optional[str]:
    if not kinds:
        return None
    if kinds == [CPU_KIND]:
        return "timings: CPU interpreter (labelled; never comparable with GPU timings)"
    if CPU_KIND in kinds:
        return f"timings: mixed ({', '.join(kinds)}); CPU-interpreter speedups are marked [cpu]"
    return f"timings: {', '.join(kinds)}"
