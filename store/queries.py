"""Queries over the store: the reads of the CLI's views, and the reads and writes of the search controller.

Every function takes an open `Session`. The module is past 500 lines on purpose: the views and the controller
share its helpers (usage, kernel_count, last_round), and what reads or writes a table is found in one file.
The views' queries only read; they load whole runs in a handful of queries (never one per kernel), so a
10,000-kernel run is read in well under a second.

Tree semantics: a Kernel with `idea_id` None is a round-0 seed (the starter); an Idea hangs under the kernel it
came from (`Idea.parent_kernel_id`); the Kernels of an Idea are its branches. A Kernel without an Evaluation is
queued work (its `state` is "queued"). A kernel's evaluation is the one with `purpose` NULL (its verdict); its
re-timings (`purpose` "retime") only add timings: every query here that reads a kernel's evaluation reads the verdict.

Times and speedups: a KernelRow's `time_ms` is the kernel's own time (the median of its ok timings), its
`ref_time_ms` the run's reference figure on that device and its `speedup` their ratio (store/clock.py); the one
evaluation's side-by-side measurement is kept in the `eval_*` fields. Kernels are ranked by their own time.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Optional

from sqlalchemy import and_, case, func, update
from sqlmodel import Session, select

from kernelsearch.store.clock import JUDGED, RETIME, RunClock, run_clock
from kernelsearch.store.clock import reference_ms as reference_ms  # the run's reference figure, read from here too
from kernelsearch.store.models import Evaluation, Idea, Kernel, LLMCall, Run, utcnow
from kernelsearch.store.status import Status

QUEUED = "queued"                 # the state of a kernel that has no evaluation yet
STATUSES = tuple(s.value for s in Status)
# not a failure of the kernel: ok, harness_error (the judge failed in its own work; the kernel was not judged) and
# unverified (compiled where no GPU is; nothing ran)
_NOT_FAILED = (Status.ok.value, Status.harness_error.value, Status.unverified.value)
_is_error = case((LLMCall.status == "ok", 0), else_=1)   # an LLM call that did not return a usable reply


# -- rows ----------------------------------------------------------------------------------------------------
@dataclass
class KernelRow:
    """One kernel with its evaluation's headline numbers (no code: see `kernel_codes`). Loaded through the run's
    clock (`_timed`): `time_ms` is the kernel's median time, `ref_time_ms` and `compile_ref_time_ms` the run's
    reference figures, `speedup` and `speedup_compile` their ratios; the evaluation's own figures are `eval_*`."""

    id: int
    run_id: int
    idea_id: Optional[int]
    parent_kernel_id: Optional[int]
    round: int
    branch: int
    language: str
    code_hash: str
    eval_id: Optional[int] = None         # evaluations are numbered in the order results were written
    status: Optional[str] = None          # None: queued
    reason: Optional[str] = None
    stage: Optional[str] = None
    time_ms: Optional[float] = None
    ref_time_ms: Optional[float] = None
    compile_ref_time_ms: Optional[float] = None
    speedup: Optional[float] = None
    speedup_compile: Optional[float] = None
    gbps: Optional[float] = None
    tflops: Optional[float] = None
    roofline_fraction: Optional[float] = None
    bottleneck: Optional[str] = None
    timing_kind: Optional[str] = None
    device: Optional[str] = None
    eval_wall_s: Optional[float] = None
    eval_time_ms: Optional[float] = None        # this evaluation's own measurement, side by side with the reference
    eval_ref_time_ms: Optional[float] = None
    eval_speedup: Optional[float] = None        # their ratio, as stored; never ranked or shown as the speedup
    timings: int = 0                            # ok timings the kernel's time is the median of
    retimes: int = 0                            # re-timing rows, any status
    retime_failed: Optional[str] = None         # the status of a re-timing that was not ok: the kernel is not ranked
    ref_timings: int = 0                        # evaluations the run's reference figure on its device is over
    ranked: bool = False                        # correct, timed, no re-timing found it wrong

    @property
    def state(self) -> str:
        return self.status or QUEUED

    @property
    def is_seed(self) -> bool:
        return self.idea_id is None


@dataclass
class IdeaRow:
    id: int
    run_id: int
    round: int
    parent_kernel_id: Optional[int]
    title: str
    text: str
    branches_wanted: int
    status: str                            # open: branches still to write | coded
    llm_call_id: Optional[int]


@dataclass
class RunStats:
    """What a run spent and found."""

    run_id: int
    rounds: int = 0                        # the highest round with an idea or a kernel
    ideas: int = 0
    kernels: int = 0
    evaluations: int = 0
    by_status: dict[str, int] = field(default_factory=dict)   # evaluation status -> count
    queued: int = 0
    best_kernel_id: Optional[int] = None
    best_speedup: Optional[float] = None
    best_speedup_compile: Optional[float] = None
    best_roofline_fraction: Optional[float] = None   # of the best kernel
    best_time_ms: Optional[float] = None             # its own time: the median of its timings
    best_timings: int = 0
    retimes: int = 0                       # re-timings of finalists (not in `evaluations`, which are kernels judged)
    device: Optional[str] = None           # the device kernels are ranked on
    reference_ms: Optional[float] = None   # the run's reference figure there, and the evaluations it is over
    reference_timings: int = 0
    timing_kinds: list[str] = field(default_factory=list)
    llm_calls: int = 0
    llm_errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0                  # of the priced calls
    unpriced_calls: int = 0                # calls whose model had no price in the config (cost unknown)
    wall_s: Optional[float] = None         # time spent running (summed over resumes), else started -> last write

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def correct(self) -> int:
        return self.by_status.get(Status.ok.value, 0)


@dataclass
class RoundStats:
    round: int
    ideas: int = 0
    branches: int = 0                      # kernels made in the round
    evaluated: int = 0
    correct: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    best_speedup: Optional[float] = None   # best of this round (the run's reference over the kernel's time)
    best_so_far: Optional[float] = None    # best of rounds 0..round
    tokens: int = 0                        # LLM calls linked to the round's ideas and kernels
    cost_usd: float = 0.0
    calls: int = 0
    unpriced: int = 0                      # of those calls, the ones without a price


@dataclass
class ProgressPoint:
    """One evaluation, in the order results arrived, with the best speedup found up to it."""

    n: int                                 # 1-based count of evaluations so far
    t_s: float                             # seconds since the run started
    kernel_id: int
    status: str
    speedup: Optional[float]
    best_so_far: Optional[float]


@dataclass
class CostRow:
    role: str
    provider: str
    model: str
    calls: int
    errors: int
    tokens_in: int
    tokens_out: int
    cost_usd: float                        # of the priced calls
    latency_s: float
    unpriced: int = 0                      # calls whose model had no price (cost unknown)


# -- the tree ------------------------------------------------------------------------------------------------
@dataclass
class RunTree:
    """A whole run's idea tree, loaded in three queries. Children lists are in id order."""

    run: Run
    kernels: dict[int, KernelRow]
    ideas: dict[int, IdeaRow]
    clock: RunClock = field(default_factory=RunClock)
    roots: list[int] = field(default_factory=list)                       # seed kernels
    top_ideas: list[int] = field(default_factory=list)                   # ideas with no parent kernel in run
    ideas_of: dict[int, list[int]] = field(default_factory=dict)         # kernel id -> its child ideas
    branches_of: dict[int, list[int]] = field(default_factory=dict)      # idea id -> its kernels
    direct_children: dict[int, list[int]] = field(default_factory=dict)  # kernel -> kernels with no idea

    def parent_of(self, kernel_id: int) -> Optional[int]:
        """The kernel this one descends from (through its idea), or None for a seed."""
        k = self.kernels[kernel_id]
        if k.idea_id is not None and k.idea_id in self.ideas:
            p = self.ideas[k.idea_id].parent_kernel_id
            return p if p in self.kernels else None
        p = k.parent_kernel_id
        return p if p in self.kernels else None

    def path_to(self, kernel_id: int) -> list[int]:
        """Kernel ids from the seed down to `kernel_id`."""
        path: list[int] = []
        seen: set[int] = set()
        cur: Optional[int] = kernel_id
        while cur is not None and cur not in seen:
            seen.add(cur)
            path.append(cur)
            cur = self.parent_of(cur)
        return path[::-1]

    def depth_of(self, kernel_id: int) -> int:
        """How many ideas lie between the seed and this kernel (a seed: 0)."""
        return sum(1 for k in self.path_to(kernel_id) if self.kernels[k].idea_id is not None)

    def best(self, n: int = 1) -> list[KernelRow]:
        """The n fastest correct kernels by their own time (ties: the older kernel first)."""
        return [self.kernels[k] for k in self.clock.ranked(self.kernels)[:n]]

    def best_kernel(self) -> Optional[KernelRow]:
        b = self.best(1)
        return b[0] if b else None


def _kernel_columns() -> tuple:
    return (
        Kernel.id, Kernel.run_id, Kernel.idea_id, Kernel.parent_kernel_id, Kernel.round, Kernel.branch,
        Kernel.language, Kernel.code_hash, Evaluation.id,
        Evaluation.status, Evaluation.reason, Evaluation.stage, Evaluation.time_ms, Evaluation.ref_time_ms,
        Evaluation.compile_ref_time_ms, Evaluation.speedup, Evaluation.speedup_compile, Evaluation.gbps,
        Evaluation.tflops, Evaluation.roofline_fraction, Evaluation.bottleneck, Evaluation.timing_kind,
        Evaluation.device, Evaluation.wall_s,
    )


def _kernel_rows(session: Session, *where) -> list[KernelRow]:
    """Kernels with their verdict's columns, not yet through the clock (`_timed`)."""
    stmt = (select(*_kernel_columns())
            .outerjoin(Evaluation, and_(Evaluation.kernel_id == Kernel.id, JUDGED))
            .where(*where).order_by(Kernel.id))
    return [KernelRow(*row) for row in session.connection().execute(stmt)]   # Core rows: no ORM cost per row


def _timed(rows: list[KernelRow], clock: RunClock) -> list[KernelRow]:
    """The rows with the run's clock applied (in place): the kernel's own time, the run's reference figure, their
    ratio; the evaluation's own figures moved to `eval_*`."""
    for k in rows:
        k.eval_time_ms, k.eval_ref_time_ms, k.eval_speedup = k.time_ms, k.ref_time_ms, k.speedup
        t = clock.times.get(k.id)
        if t is not None:
            k.time_ms, k.timings = t.time_ms, t.timings
        elif k.time_ms is not None:
            k.timings = 1
        ref = clock.reference(t.device if t is not None else k.device)
        k.ref_time_ms = ref.eager_ms if ref else None
        k.compile_ref_time_ms = ref.compile_ms if ref else None
        k.ref_timings = ref.eager_n if ref else 0
        ok = k.time_ms is not None and k.time_ms > 0
        k.speedup = k.ref_time_ms / k.time_ms if ok and k.ref_time_ms is not None else None
        k.speedup_compile = k.compile_ref_time_ms / k.time_ms if ok and k.compile_ref_time_ms is not None else None
        k.retimes, k.retime_failed = clock.retimes.get(k.id, 0), clock.failed.get(k.id)
        k.ranked = clock.is_ranked(k.id)
    return rows


def _idea_rows(session: Session, *where) -> list[IdeaRow]:
    stmt = select(Idea.id, Idea.run_id, Idea.round, Idea.parent_kernel_id, Idea.title, Idea.text,
                  Idea.branches_wanted, Idea.status, Idea.llm_call_id).where(*where).order_by(Idea.id)
    return [IdeaRow(*row) for row in session.connection().execute(stmt)]


def tree(session: Session, run_id: int) -> RunTree:
    """The whole idea tree of a run (kernels without code)."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run with id {run_id}")
    clock = run_clock(session, run_id)
    kernels = {k.id: k for k in _timed(_kernel_rows(session, Kernel.run_id == run_id), clock)}
    ideas = {i.id: i for i in _idea_rows(session, Idea.run_id == run_id)}
    t = RunTree(run=run, kernels=kernels, ideas=ideas, clock=clock)
    ideas_of: dict[int, list[int]] = defaultdict(list)
    branches_of: dict[int, list[int]] = defaultdict(list)
    direct: dict[int, list[int]] = defaultdict(list)
    for i in ideas.values():
        if i.parent_kernel_id in kernels:
            ideas_of[i.parent_kernel_id].append(i.id)
        else:
            t.top_ideas.append(i.id)
    for k in kernels.values():
        if k.idea_id is not None and k.idea_id in ideas:
            branches_of[k.idea_id].append(k.id)
        elif k.parent_kernel_id in kernels and k.parent_kernel_id != k.id:
            direct[k.parent_kernel_id].append(k.id)
        else:
            t.roots.append(k.id)
    t.ideas_of, t.branches_of, t.direct_children = dict(ideas_of), dict(branches_of), dict(direct)
    return t


# -- single lookups ------------------------------------------------------------------------------------------
def list_runs(session: Session) -> list[Run]:
    return list(session.exec(select(Run).order_by(Run.id)))


def get_run(session: Session, name: str) -> Optional[Run]:
    """The run called `name`, or None."""
    return session.exec(select(Run).where(Run.name == name)).first()


def get_kernel(session: Session, kernel_id: int) -> Optional[Kernel]:
    return session.get(Kernel, kernel_id)


def get_evaluation(session: Session, kernel_id: int) -> Optional[Evaluation]:
    """The kernel's evaluation (its verdict; not a re-timing), or None while it is queued."""
    return session.exec(select(Evaluation).where(Evaluation.kernel_id == kernel_id, JUDGED)).first()


def retimings(session: Session, kernel_id: int) -> list[Evaluation]:
    """The kernel's re-timings, oldest first."""
    return list(session.exec(select(Evaluation).where(Evaluation.kernel_id == kernel_id,
                                                      Evaluation.purpose == RETIME).order_by(Evaluation.id)).all())


def kernel_row(session: Session, kernel_id: int, clock: Optional[RunClock] = None) -> Optional[KernelRow]:
    """One kernel through its run's clock (`clock`: the run's, if already read)."""
    rows = _kernel_rows(session, Kernel.id == kernel_id)
    if not rows:
        return None
    return _timed(rows, clock if clock is not None else run_clock(session, rows[0].run_id))[0]


def lineage(session: Session, kernel_id: int) -> list[tuple[KernelRow, Optional[IdeaRow]]]:
    """The kernel's ancestry from the starter (first) down to the kernel itself (last), each kernel with the
    idea it was written for (None for a seed). One query per generation: a path is as long as the rounds."""
    chain: list[tuple[KernelRow, Optional[IdeaRow]]] = []
    seen: set[int] = set()
    cur: Optional[int] = kernel_id
    clock: Optional[RunClock] = None
    while cur is not None and cur not in seen:
        seen.add(cur)
        k = kernel_row(session, cur, clock)
        if k is not None and clock is None:
            clock = run_clock(session, k.run_id)   # a lineage stays in one run
        if k is None:
            break
        idea = None
        if k.idea_id is not None:
            rows = _idea_rows(session, Idea.id == k.idea_id)
            idea = rows[0] if rows else None
        chain.append((k, idea))
        cur = idea.parent_kernel_id if idea is not None and idea.parent_kernel_id is not None \
            else k.parent_kernel_id
    return chain[::-1]


def best_kernels(session: Session, run_id: int, n: int = 1, clock: Optional[RunClock] = None) -> list[KernelRow]:
    """The n fastest correct kernels of a run by their own time (ties: the older kernel first); `clock`: the run's,
    if already read."""
    clock = clock if clock is not None else run_clock(session, run_id)
    ids = clock.ranked()[:n]
    if not ids:
        return []
    rows = {k.id: k for k in _timed(_kernel_rows(session, Kernel.id.in_(ids)), clock)}
    return [rows[k] for k in ids]


def has_correct(session: Session, run_id: int) -> bool:
    """Whether the run has a kernel whose evaluation is ok."""
    return session.exec(select(Evaluation.id).join(Kernel, Kernel.id == Evaluation.kernel_id)
                        .where(Kernel.run_id == run_id, JUDGED, Evaluation.status == "ok").limit(1)).first() is not None


def kernel_codes(session: Session, run_id: int) -> tuple[dict[int, str], dict[str, str]]:
    """(kernel id -> code hash, code hash -> code) for a run: each distinct code once."""
    by_kernel: dict[int, str] = {}
    codes: dict[str, str] = {}
    for kid, h, code in session.execute(select(Kernel.id, Kernel.code_hash, Kernel.code)
                                        .where(Kernel.run_id == run_id)):
        by_kernel[kid] = h
        codes.setdefault(h, code)
    return by_kernel, codes


def error_texts(session: Session, run_id: int) -> dict[int, str]:
    """kernel id -> the evaluation's longer error text, for the kernels that have one."""
    stmt = (select(Evaluation.kernel_id, Evaluation.error_text)
            .join(Kernel, Kernel.id == Evaluation.kernel_id)
            .where(Kernel.run_id == run_id, JUDGED, Evaluation.error_text.is_not(None)))
    return {kid: text for kid, text in session.execute(stmt) if text}


def detail_jsons(session: Session, run_id: int) -> dict[int, str]:
    """kernel id -> the evaluation's per-stage detail (JSON text), for every evaluated kernel of a run."""
    stmt = (select(Evaluation.kernel_id, Evaluation.detail_json)
            .join(Kernel, Kernel.id == Evaluation.kernel_id).where(Kernel.run_id == run_id, JUDGED))
    return dict(session.execute(stmt).all())


# -- statistics ----------------------------------------------------------------------------------------------
def _wall_s(run: Run, last: Optional[datetime]) -> Optional[float]:
    end = run.finished_at or last
    if end is None or run.started_at is None:
        return None
    return max(0.0, (end - run.started_at).total_seconds())


def run_stats(session: Session, run_id: int) -> RunStats:
    """Tokens, cost, evaluations by status, the best kernel (by its own time), the reference figure and wall time
    of one run (seven queries)."""
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run with id {run_id}")
    s = RunStats(run_id=run_id)
    s.ideas, max_idea_round, last_idea = session.execute(
        select(func.count(Idea.id), func.max(Idea.round), func.max(Idea.created_at))
        .where(Idea.run_id == run_id)).one()
    s.kernels, max_kernel_round, last_kernel = session.execute(
        select(func.count(Kernel.id), func.max(Kernel.round), func.max(Kernel.created_at))
        .where(Kernel.run_id == run_id)).one()
    s.rounds = max(max_idea_round or 0, max_kernel_round or 0)
    last_eval = None
    kinds: set[str] = set()
    for status, kind, purpose, count, last in session.execute(
            select(Evaluation.status, Evaluation.timing_kind, Evaluation.purpose, func.count(Evaluation.id),
                   func.max(Evaluation.created_at))
            .join(Kernel, Kernel.id == Evaluation.kernel_id).where(Kernel.run_id == run_id)
            .group_by(Evaluation.status, Evaluation.timing_kind, Evaluation.purpose)):
        last_eval = last if last_eval is None or (last and last > last_eval) else last_eval
        if purpose is not None:   # a re-timing: not a kernel judged
            s.retimes += count
            continue
        s.by_status[status] = s.by_status.get(status, 0) + count
        s.evaluations += count
        if kind:
            kinds.add(kind)
    s.timing_kinds = sorted(kinds)
    s.queued = s.kernels - s.evaluations
    clock = run_clock(session, run_id)
    s.device = clock.device
    ref = clock.reference(clock.device)
    if ref is not None:
        s.reference_ms, s.reference_timings = ref.eager_ms, ref.eager_n
    best = best_kernels(session, run_id, 1, clock)
    if best:
        b = best[0]
        s.best_kernel_id, s.best_speedup, s.best_speedup_compile = b.id, b.speedup, b.speedup_compile
        s.best_roofline_fraction, s.best_time_ms, s.best_timings = b.roofline_fraction, b.time_ms, b.timings
    calls, errors, tin, tout, cost, priced, last_call = session.execute(
        select(func.count(LLMCall.id), func.sum(_is_error),
               func.sum(LLMCall.tokens_in), func.sum(LLMCall.tokens_out), func.sum(LLMCall.cost_usd),
               func.count(LLMCall.cost_usd), func.max(LLMCall.created_at))
        .where(LLMCall.run_id == run_id)).one()
    s.llm_calls, s.llm_errors = calls or 0, errors or 0
    s.unpriced_calls = s.llm_calls - (priced or 0)
    s.tokens_in, s.tokens_out, s.cost_usd = tin or 0, tout or 0, float(cost or 0.0)
    if run.elapsed_s:
        s.wall_s = run.elapsed_s
    else:
        lasts = [d for d in (last_idea, last_kernel, last_eval, last_call) if d is not None]
        s.wall_s = _wall_s(run, max(lasts) if lasts else None)
    return s


def round_stats(session: Session, run_id: int) -> list[RoundStats]:
    """Per round: ideas, branches, evaluated, correct, best speedup (and best so far: of the fastest kernel of the
    rounds up to it), tokens and cost."""
    rounds: dict[int, RoundStats] = {}

    def get(r: int) -> RoundStats:
        return rounds.setdefault(r, RoundStats(round=r))

    for r, n in session.execute(select(Idea.round, func.count(Idea.id)).where(Idea.run_id == run_id)
                                .group_by(Idea.round)):
        get(r).ideas = n
    round_of: dict[int, int] = dict(session.execute(select(Kernel.id, Kernel.round)
                                                    .where(Kernel.run_id == run_id)).all())
    for r in round_of.values():
        get(r).branches += 1
    for r, status, n in session.execute(
            select(Kernel.round, Evaluation.status, func.count(Evaluation.id))
            .join(Evaluation, Evaluation.kernel_id == Kernel.id).where(Kernel.run_id == run_id, JUDGED)
            .group_by(Kernel.round, Evaluation.status)):
        rs = get(r)
        rs.by_status[status] = n
        rs.evaluated += n
        if status == "ok":
            rs.correct = n
    clock = run_clock(session, run_id)
    fastest: dict[int, int] = {}   # round -> its fastest kernel
    for kid in clock.ranked():     # fastest first: a round's first is its best
        fastest.setdefault(round_of.get(kid, 0), kid)
    for r, kid in fastest.items():
        get(r).best_speedup = clock.speedup(kid)
    # LLM calls linked to a round through the ideas and kernels they produced (each call counted once).
    call_round: dict[int, int] = {}
    for cid, r in session.execute(select(Idea.llm_call_id, Idea.round)
                                  .where(Idea.run_id == run_id, Idea.llm_call_id.is_not(None))):
        call_round.setdefault(cid, r)
    for cid, r in session.execute(select(Kernel.llm_call_id, Kernel.round)
                                  .where(Kernel.run_id == run_id, Kernel.llm_call_id.is_not(None))):
        call_round.setdefault(cid, r)
    if call_round:
        for cid, tin, tout, cost in session.execute(
                select(LLMCall.id, LLMCall.tokens_in, LLMCall.tokens_out, LLMCall.cost_usd)
                .where(LLMCall.run_id == run_id)):
            if cid in call_round:
                rs = get(call_round[cid])
                rs.tokens += (tin or 0) + (tout or 0)
                rs.cost_usd += cost or 0.0
                rs.calls += 1
                rs.unpriced += cost is None
    best: Optional[int] = None
    out = [rounds[r] for r in sorted(rounds)]
    for rs in out:
        kid = fastest.get(rs.round)
        if kid is not None and (best is None or clock.rank_key(kid) < clock.rank_key(best)):
            best = kid
        rs.best_so_far = clock.speedup(best) if best is not None else None
    return out


def progress(session: Session, run_id: int) -> list[ProgressPoint]:
    """Every kernel's evaluation (re-timings left out) in the order it was written, with its speedup and the best
    speedup up to it (for progress plots): the run's reference figure over the kernel's time as known now, the best
    being the fastest kernel so far."""
    if session.get(Run, run_id) is None:
        raise LookupError(f"no run with id {run_id}")
    clock = run_clock(session, run_id)
    started = select(Run.started_at).where(Run.id == run_id).scalar_subquery()
    seconds = (func.julianday(Evaluation.created_at) - func.julianday(started)) * 86400.0   # in SQLite: no
    stmt = (select(Evaluation.kernel_id, Evaluation.status, seconds)                     # datetime per row
            .join(Kernel, Kernel.id == Evaluation.kernel_id).where(Kernel.run_id == run_id, JUDGED)
            .order_by(Evaluation.created_at, Evaluation.id))
    points: list[ProgressPoint] = []
    best: Optional[int] = None
    for n, (kid, status, t) in enumerate(session.connection().execute(stmt), start=1):
        if clock.is_ranked(kid) and (best is None or clock.rank_key(kid) < clock.rank_key(best)):
            best = kid
        points.append(ProgressPoint(n=n, t_s=max(0.0, t or 0.0), kernel_id=kid, status=status,
                                    speedup=clock.speedup(kid) if status == "ok" else None,
                                    best_so_far=clock.speedup(best) if best is not None else None))
    return points


def cost_breakdown(session: Session, run_id: int) -> list[CostRow]:
    """LLM calls of a run grouped by role, provider and model."""
    stmt = (select(LLMCall.role, LLMCall.provider, LLMCall.model, func.count(LLMCall.id),
                   func.sum(_is_error), func.sum(LLMCall.tokens_in),
                   func.sum(LLMCall.tokens_out), func.sum(LLMCall.cost_usd), func.sum(LLMCall.latency_s),
                   func.count(LLMCall.cost_usd))
            .where(LLMCall.run_id == run_id)
            .group_by(LLMCall.role, LLMCall.provider, LLMCall.model)
            .order_by(LLMCall.role, LLMCall.provider, LLMCall.model))
    return [CostRow(role, prov, model, calls, errs or 0, tin or 0, tout or 0, float(cost or 0.0),
                    float(lat or 0.0), calls - priced)
            for role, prov, model, calls, errs, tin, tout, cost, lat, priced in session.execute(stmt)]


def ideas_by_id(session: Session, ids: Iterable[int]) -> dict[int, IdeaRow]:
    ids = list(ids)
    if not ids:
        return {}
    return {i.id: i for i in _idea_rows(session, Idea.id.in_(ids))}


def usage(session: Session, run_id: int) -> tuple[int, float]:
    """Tokens (in + out) and dollars spent by a run's LLM calls so far; unpriced calls count as no dollars."""
    tok, cost = session.execute(select(func.coalesce(func.sum(LLMCall.tokens_in + LLMCall.tokens_out), 0),
                                       func.coalesce(func.sum(LLMCall.cost_usd), 0.0))
                                .where(LLMCall.run_id == run_id)).one()
    return int(tok), float(cost)


def kernel_count(session: Session, run_id: int) -> int:
    """Kernels the run has stored (evaluated or queued): what its evaluation budget counts."""
    return session.exec(select(func.count(Kernel.id)).where(Kernel.run_id == run_id)).one()


def last_round(session: Session, run_id: int) -> int:
    """The highest round the run has written ideas for; 0 before the first."""
    return session.exec(select(func.coalesce(func.max(Idea.round), 0)).where(Idea.run_id == run_id)).one()


# -- the controller's reads and writes ------------------------------------------------------------------------
# The search controller decides; these read and write for it. Each takes the controller's open session, so
# what it groups into one unit of work (a duplicate check, the budget check and the insert) stays one.
def run_elapsed(session: Session, run_id: int) -> float:
    """Wall time the run has spent running so far, summed over resumes."""
    return session.get(Run, run_id).elapsed_s


def save_elapsed(session: Session, run_id: int, elapsed_s: float) -> None:
    run = session.get(Run, run_id)
    run.elapsed_s = elapsed_s
    session.add(run)


def finish_run(session: Session, run_id: int, stop_reason: str, elapsed_s: float) -> None:
    run = session.get(Run, run_id)
    run.status, run.stop_reason, run.finished_at = "finished", stop_reason, utcnow()
    run.elapsed_s = elapsed_s
    session.add(run)


def interrupt_run(session: Session, run_id: int, stop_reason: str, elapsed_s: float) -> None:
    run = session.get(Run, run_id)
    run.status, run.stop_reason = "interrupted", stop_reason
    run.elapsed_s = elapsed_s
    session.add(run)


def add_llm_call(session: Session, run_id: int, row: dict) -> int:
    """Store one LLM call (`row`: the LLMCall columns but the run); returns its id."""
    call = LLMCall(run_id=run_id, **row)
    session.add(call)
    session.flush()
    return call.id


def add_idea(session: Session, run_id: int, *, round: int, parent_kernel_id: Optional[int], title: str, text: str,
             meta_json: str, llm_call_id: Optional[int], branches_wanted: int) -> int:
    idea = Idea(run_id=run_id, round=round, parent_kernel_id=parent_kernel_id, title=title, text=text,
                meta_json=meta_json, llm_call_id=llm_call_id, branches_wanted=branches_wanted)
    session.add(idea)
    session.flush()
    return idea.id


def set_language(session: Session, kernel_id: int, language: str | None) -> None:
    """A kernel's language as its evaluation found it (the judge's static check: triton or cuda); None keeps it."""
    kernel = session.get(Kernel, kernel_id) if language in ("triton", "cuda") else None
    if kernel is not None and kernel.language != language:
        kernel.language = language
        session.add(kernel)


def add_kernel(session: Session, run_id: int, *, code: str, code_hash: str, language: str, round: int = 0,
               idea_id: Optional[int] = None, parent_kernel_id: Optional[int] = None, branch: int = 0,
               llm_call_id: Optional[int] = None) -> int:
    kernel = Kernel(run_id=run_id, idea_id=idea_id, parent_kernel_id=parent_kernel_id, round=round, branch=branch,
                    code=code, code_hash=code_hash, language=language, llm_call_id=llm_call_id)
    session.add(kernel)
    session.flush()
    return kernel.id


def first_kernel(session: Session, run_id: int) -> Optional[Kernel]:
    """The run's first kernel (its round-0 starter), or None before it is stored."""
    return session.exec(select(Kernel).where(Kernel.run_id == run_id).order_by(Kernel.id)).first()


def queued_kernels(session: Session, run_id: int) -> list[Kernel]:
    """The run's kernels that have no evaluation yet (a re-timing is not one: only a judged kernel has those)."""
    return list(session.exec(select(Kernel).where(Kernel.run_id == run_id)
                             .where(~Kernel.id.in_(select(Evaluation.kernel_id).where(JUDGED)))).all())


def unjudged_kernels(session: Session, run_id: int) -> list[tuple[Kernel, Evaluation]]:
    """The run's kernels whose evaluation is `harness_error` (the judge failed in its own work: they were not
    judged), each with it: a resumed run evaluates them again."""
    return list(session.exec(select(Kernel, Evaluation).join(Evaluation, Evaluation.kernel_id == Kernel.id)
                             .where(Kernel.run_id == run_id, JUDGED, Evaluation.status == Status.harness_error.value)
                             .order_by(Kernel.id)).all())


def correct_kernels(session: Session, run_id: int) -> list[tuple[Kernel, Evaluation]]:
    """The run's kernels whose evaluation is ok, each with it."""
    return list(session.exec(select(Kernel, Evaluation).join(Evaluation, Evaluation.kernel_id == Kernel.id)
                             .where(Kernel.run_id == run_id, JUDGED, Evaluation.status == "ok")).all())


def run_codes(session: Session, run_id: int, before_round: Optional[int] = None) -> list[str]:
    """The code of the run's kernels, or only of those from rounds before `before_round`."""
    q = select(Kernel.code).where(Kernel.run_id == run_id)
    if before_round is not None:
        q = q.where(Kernel.round < before_round)
    return list(session.exec(q).all())


def kernel_with_hash(session: Session, run_id: int, code_hash: str) -> Optional[int]:
    """The id of a kernel of the run with this code hash, or None."""
    return session.exec(select(Kernel.id).where(Kernel.run_id == run_id, Kernel.code_hash == code_hash)).first()


def ideas_with_evaluations(session: Session, run_id: int) -> list[tuple[Idea, list[Evaluation]]]:
    """Every idea of the run in the order written, with the evaluations of its branches."""
    ideas = session.exec(select(Idea).where(Idea.run_id == run_id).order_by(Idea.id)).all()
    by_idea: dict[Optional[int], list[Evaluation]] = defaultdict(list)
    for idea_id, ev in session.exec(select(Kernel.idea_id, Evaluation)
                                    .join(Evaluation, Evaluation.kernel_id == Kernel.id)
                                    .where(Kernel.run_id == run_id, JUDGED)).all():
        by_idea[idea_id].append(ev)
    return [(idea, by_idea.get(idea.id, [])) for idea in ideas]


def failed_kernels(session: Session, run_id: int, *, before_round: int, limit: int) -> list[tuple[Kernel, Evaluation]]:
    """The run's most recent kernels from rounds before `before_round` that failed (their evaluation is neither ok
    nor `harness_error`, which says nothing about the kernel), newest first."""
    return list(session.exec(select(Kernel, Evaluation).join(Evaluation, Evaluation.kernel_id == Kernel.id)
                             .where(Kernel.run_id == run_id, Kernel.round < before_round, JUDGED,
                                    Evaluation.status.not_in(_NOT_FAILED))
                             .order_by(Kernel.id.desc()).limit(limit)).all())


def failed_evaluations_of_idea(session: Session, idea_id: int) -> list[Evaluation]:
    """The evaluations of an idea's branches that failed (neither ok nor `harness_error`)."""
    return list(session.exec(select(Evaluation).join(Kernel).where(Kernel.idea_id == idea_id, JUDGED,
                                                                   Evaluation.status.not_in(_NOT_FAILED))).all())


def open_ideas(session: Session, run_id: int, round: int) -> list[Idea]:
    """The round's ideas with branches still to write."""
    return list(session.exec(select(Idea).where(Idea.run_id == run_id, Idea.round == round,
                                                Idea.status == "open")).all())


def branches_written(session: Session, run_id: int, round: int) -> set[tuple[Optional[int], int]]:
    """(idea id, branch) of every kernel the round has stored."""
    return set(session.exec(select(Kernel.idea_id, Kernel.branch)
                            .where(Kernel.run_id == run_id, Kernel.round == round)).all())


def mark_ideas_coded(session: Session, idea_ids: Iterable[int]) -> None:
    """Every branch of these ideas was attempted."""
    ids = list(idea_ids)
    if ids:
        session.exec(update(Idea).where(Idea.id.in_(ids)).values(status="coded"))


def add_evaluation(s: Session, row: Evaluation) -> Evaluation:
    """Store one evaluation result (the judge's typed result, as `EvalResult.row(kernel_id)`): the one place results
    become rows. A kernel has one evaluation; only a `harness_error` (the kernel was not judged) is replaced, by
    the result of evaluating it again. Any other verdict stays: a second one is an error. A re-timing
    (`purpose` RETIME) is added beside the verdict, never in its place."""
    if row.purpose == RETIME:
        s.add(row)
        s.flush()   # visible to the Core reads that follow in the same session (run_clock, kernel_row)
        return row
    if row.purpose is not None:
        raise ValueError(f"unknown evaluation purpose {row.purpose!r}")
    old = s.exec(select(Evaluation).where(Evaluation.kernel_id == row.kernel_id, JUDGED)).first()
    if old is not None:
        if old.status != Status.harness_error.value:
            raise ValueError(f"kernel {row.kernel_id} already has an evaluation ({old.status}); only a "
                             "harness_error is evaluated again")
        s.delete(old)
        s.flush()
    s.add(row)
    s.flush()
    return row


# -- exports (`kernelsearch export`) -------------------------------------------------------------------------------
def add_export(session: Session, row: "KernelExport") -> int:  # noqa: F821 - imported where used
    """Record one export of a kernel (its files' checksum); returns the row's id."""
    session.add(row)
    session.flush()
    return row.id


def exports_of(session: Session, kernel_id: int) -> list["KernelExport"]:  # noqa: F821
    """The recorded exports of a kernel, oldest first."""
    from kernelsearch.store.models import KernelExport

    return list(session.exec(select(KernelExport).where(KernelExport.kernel_id == kernel_id)
                             .order_by(KernelExport.id)).all())
