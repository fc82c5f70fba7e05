"""A kernel's result in the words the LLM is shown: a seed's measured result, a failed branch, a kernel the judge
could not evaluate. Speedups are the run's reference figure over the kernel's own time (store/clock.py)."""
from __future__ import annotations

import json

from sqlmodel import select

from kernelsearch.agent.roles import device_text, prompt
from kernelsearch.store import Evaluation, Kernel, session_scope
from kernelsearch.store import queries as q
from kernelsearch.store.status import Status


def why(ev: Evaluation) -> str:
    """One failed branch in a line: its status and reason, and the error's last line where it says more."""
    why = f"{ev.status}: {ev.reason or ''}".strip()
    last = next((ln.strip() for ln in reversed((ev.error_text or "").splitlines()) if ln.strip()), "")
    if last and last not in why:
        why += f" ({last[:160]})"
    return why[:300]


def not_judged(ev: Evaluation | q.KernelRow) -> str:
    """A `harness_error` as the LLM is told it: the judge could not evaluate the kernel, and why; never as the
    kernel's failure (prompts/not_judged.md)."""
    return prompt("not_judged").substitute(reason=(ev.reason or "").strip()[:300]).strip()


def describe_result(k: q.KernelRow | None) -> str:
    """A kernel's result as the LLM is shown it: its own time (the median of its timings) and the run's reference
    figure over it (store/clock.py), or its failure."""
    if k is None or k.status is None:
        return "not evaluated yet"
    if k.status == Status.harness_error:
        return not_judged(k)
    if k.status != Status.ok:
        return f"{k.status}: {k.reason}"
    of = f", median of {k.timings} timings" if k.timings > 1 else ""
    parts = [f"{k.time_ms:.4g} ms ({k.timing_kind}{of})"]
    if k.speedup is not None:
        parts.append(f"{k.speedup:.2f}x eager")
    if k.speedup_compile:
        parts.append(f"{k.speedup_compile:.2f}x torch.compile")
    if k.roofline_fraction is not None:
        parts.append(f"{k.roofline_fraction:.0%} of roofline ({k.bottleneck}-bound)")
    return ", ".join(parts)


def device_prompt(engine, run_id: int, mode: str) -> str:
    """The device as the system prompt names it: on a GPU, from the ceilings the run's latest evaluation measured
    (judge/roofline.py, its `detail.ceilings`), never a datasheet's figures (agent/roles.py device_text)."""
    ceil = None
    if mode == "cuda":
        with session_scope(engine) as s:
            raw = s.exec(select(Evaluation.detail_json).join(Kernel, Kernel.id == Evaluation.kernel_id)
                         .where(Kernel.run_id == run_id, Evaluation.detail_json.contains('"ceilings"'))
                         .order_by(Evaluation.id.desc()).limit(1)).first()
        try:
            ceil = json.loads(raw or "{}").get("ceilings")
        except ValueError:
            ceil = None
    return device_text(mode, ceil if isinstance(ceil, dict) else None)
