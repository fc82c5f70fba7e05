"""The Amdahl plan: where a model run spends its search.

For each problem: its share f of the model's profiled time; the speedup s it could get, from its roofline headroom
(its measured time per call over the time its bytes or FLOPs need at the device's measured ceilings, divided by
`attainable`, the fraction of the roofline a found kernel is assumed to reach; at least 1, at most `max_speedup`);
and the model's speedup if only it improved, 1 / ((1 - f) + f / s). Problems are ordered by that gain. The plan
stops when the problems left, all improved together, could not speed the model up by more than `min_gain`, or at
`max_problems`; a problem whose share of the evaluation budget would be under `min_evaluations` is left out too,
lowest gain first, its share going to the others. A problem the provider cannot search (a generated file the
offline provider's matcher refuses) is listed with its reason and gets no budget. The budgets (evaluations, tokens,
dollars, wall time) are split among the searched problems in proportion to their gain.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from kernelsearch.model.extract import Part, describe
from kernelsearch.model.settings import PlanSettings


def amdahl(f: float, s: float) -> float:
    """The model's speedup when a part of share f is made s times faster."""
    return 1.0 / ((1.0 - f) + f / s)


def amdahl_many(pairs: list[tuple[float, float]]) -> float:
    """The model's speedup when each part (share f, speedup s) improves at once."""
    rest = 1.0 - sum(f for f, _ in pairs)
    return 1.0 / (rest + sum(f / s for f, s in pairs))


def floor_ms(flops: float, nbytes: float, dtype: str, ceilings: dict) -> Optional[float]:
    """The time a call's bytes or FLOPs need at the ceilings (the larger), None without a ceiling."""
    floors = []
    if nbytes and ceilings.get("copy_gbps"):
        floors.append(nbytes / (ceilings["copy_gbps"] * 1e9) * 1e3)
    rate = ceilings.get(f"{dtype}_tflops")
    if flops and rate:
        floors.append(flops / (rate * 1e12) * 1e3)
    return max(floors) if floors else None


def possible_speedup(part: Part, ceilings: dict, settings: PlanSettings) -> tuple[float, Optional[float]]:
    """(s, roofline fraction now): the headroom to `attainable` of the roofline, in [1, max_speedup]."""
    floor = floor_ms(part.flops, part.nbytes, part.dtype, ceilings)
    t = part.time_per_call_ms
    if floor is None or t <= 0:
        return 1.0, None
    s = t / (floor / settings.attainable)
    return min(max(s, 1.0), settings.max_speedup), floor / t


@dataclass
class Entry:
    key: str
    what: str
    kind: str
    spec: str
    share: float
    time_ms: float
    calls: float
    roofline_now: Optional[float]
    speedup: float                     # possible, from the roofline headroom
    gain: float                        # the model's speedup if only this part improves, minus 1
    selected: bool = False
    reason: Optional[str] = None       # why not searched
    budget: dict = field(default_factory=dict)


@dataclass
class Plan:
    entries: list[Entry]
    total_ms: float
    clock: str
    predicted: float                   # the model's speedup if every selected part reaches its possible speedup
    min_gain: float

    def as_dict(self) -> dict:
        return {**asdict(self), "entries": [asdict(e) for e in self.entries]}

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        return cls(**{**d, "entries": [Entry(**e) for e in d["entries"]]})

    @property
    def selected(self) -> list[Entry]:
        return [e for e in self.entries if e.selected]


def make_plan(parts: list[Part], profile: dict, settings: PlanSettings, budgets: dict,
              unsearchable: Callable[[Part], Optional[str]]) -> Plan:
    entries = []
    for p in parts:
        s, now = possible_speedup(p, profile["ceilings"], settings)
        entries.append(Entry(key=p.key, what=describe(p), kind=p.kind, spec=p.spec, share=p.share,
                             time_ms=p.time_ms, calls=p.calls, roofline_now=now, speedup=s,
                             gain=amdahl(p.share, s) - 1.0))
    entries.sort(key=lambda e: -e.gain)
    chosen: list[Entry] = []
    for i, e in enumerate(entries):
        rest = [(x.share, x.speedup) for x in entries[i:] if x.share >= settings.min_share]
        if e.share < settings.min_share:
            e.reason = f"share {e.share:.1%} below plan.min_share {settings.min_share:.1%}"
        elif amdahl_many(rest) - 1.0 <= settings.min_gain:
            e.reason = (f"the problems from here on together could speed the model up by "
                        f"{amdahl_many(rest) - 1.0:.2%} at most (plan.min_gain {settings.min_gain:.2%})")
        elif len(chosen) >= settings.max_problems:
            e.reason = f"plan.max_problems {settings.max_problems} reached"
        elif unsearchable(parts_by_key(parts)[e.key]):
            e.reason = unsearchable(parts_by_key(parts)[e.key])
        else:
            e.selected = True
            chosen.append(e)
    evals = budgets.get("evaluations")
    while evals is not None and len(chosen) > 1:
        total_gain = sum(e.gain for e in chosen)
        last = chosen[-1]   # the lowest gain: the list is in gain order
        share = evals * (last.gain / total_gain if total_gain > 0 else 1.0 / len(chosen))
        if share >= settings.min_evaluations:
            break
        chosen.pop()
        last.selected = False
        last.reason = (f"its share of the evaluation budget ({share:.1f}) is under plan.min_evaluations "
                       f"{settings.min_evaluations}: left to the problems with more to gain")
    total_gain = sum(e.gain for e in chosen)
    for e in chosen:
        w = e.gain / total_gain if total_gain > 0 else 1.0 / len(chosen)
        for k, v in budgets.items():
            if v is None:
                continue
            # every searched problem gets its starter and at least one idea's kernel
            e.budget[k] = max(2 if k == "evaluations" else 1, round(v * w)) if k in ("evaluations", "tokens") \
                else v * w
    predicted = amdahl_many([(e.share, e.speedup) for e in chosen]) if chosen else 1.0
    return Plan(entries=entries, total_ms=profile["total_ms"], clock=profile["clock"], predicted=predicted,
                min_gain=settings.min_gain)


def parts_by_key(parts: list[Part]) -> dict[str, Part]:
    return {p.key: p for p in parts}


def _ms(v: float) -> str:
    return f"{v:.3f}" if v < 100 else f"{v:.0f}"


def profile_lines(profile: dict, top: int = 15) -> list[str]:
    """The profile table: operator, module path, shapes, dtype, calls, time, share."""
    clock = "CUDA time" if profile["clock"] == "cuda" else "CPU time (labelled cpu: not GPU timings)"
    lines = [f"profile of one forward on {profile.get('device_name', profile['clock'])}, {clock}: "
             f"{_ms(profile['total_ms'])} ms in operators",
             f"  {'operator':<22} {'module':<28} {'shapes':<34} {'dtype':<9} {'calls':>5} {'ms':>9} {'share':>6}"]
    for r in profile["rows"][:top]:
        shapes = ",".join("x".join(str(n) for n in s) for s in r["shapes"] if s)
        dtype = next((d for d in r["dtypes"] if d in ("float32", "float16", "bfloat16", "float64")), "-")
        lines.append(f"  {r['op'][:22]:<22} {r['module'][-28:]:<28} {shapes[:34]:<34} {dtype:<9} "
                     f"{r['calls']:>5.0f} {_ms(r['time_ms']):>9} {r['share']:>6.1%}")
    if len(profile["rows"]) > top:
        rest = profile["rows"][top:]
        lines.append(f"  ... {len(rest)} more rows, {sum(r['share'] for r in rest):.1%} of the time")
    return lines


def plan_lines(plan: Plan) -> list[str]:
    lines = [f"Amdahl plan ({plan.clock} times): share f, possible speedup s from the roofline headroom, model "
             "speedup 1/((1-f)+f/s) if only it improves",
             f"  {'problem':<36} {'share':>6} {'roof':>5} {'s':>6} {'model':>7}  budget / why not"]
    for e in plan.entries:
        roof = f"{e.roofline_now:.0%}" if e.roofline_now is not None else "-"
        why = ", ".join(f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}" for k, v in e.budget.items()) \
            if e.selected else f"not searched: {e.reason}"
        lines.append(f"  {e.key[:36]:<36} {e.share:>6.1%} {roof:>5} {e.speedup:>5.2f}x {1 + e.gain:>6.3f}x  {why}")
    lines.append(f"predicted model speedup if every searched problem reaches its possible speedup: "
                 f"{plan.predicted:.3f}x")
    return lines
