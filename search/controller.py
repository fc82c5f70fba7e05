"""The async controller: one run, round by round, written to the store as each step happens.

Each round: the idea writer gets the seeds (the fastest correct kernels, kept diverse) and the ideas already
tried with their outcomes; the coder turns each idea into branches concurrently; each branch goes to the
evaluator pool as soon as its code exists; results are stored as they arrive. Resume is a query: ideas with
branches still to write are written, kernels with no evaluation are evaluated, then the rounds go on.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Callable

from sqlalchemy.engine import Engine
from sqlmodel import select

from kernelsearch.agent.errors import AuthError
from kernelsearch.agent.providers import make_provider
from kernelsearch.agent.roles import Coder, IdeaWriter, SeedView
from kernelsearch.config import Config
from kernelsearch.evaluators.problem import load_problem
from kernelsearch.sandbox.pool import EvaluatorPool
from kernelsearch.search.seeds import Scored, pick_seeds
from kernelsearch.store import Evaluation, Idea, Kernel, LLMCall, Run, session_scope
from kernelsearch.store.models import utcnow
from kernelsearch.store.queries import kernel_count, last_round, usage

EventSink = Callable[[str, dict], None]
EVAL_COLUMNS = ("status", "reason", "error_text", "stage", "time_ms", "ref_time_ms", "compile_ref_time_ms",
                "speedup", "speedup_compile", "gbps", "tflops", "roofline_fraction", "bottleneck", "timing_kind",
                "device", "gpu_index", "wall_s")


def code_hash(code: str) -> str:
    return hashlib.sha256(code.strip().encode()).hexdigest()[:16]


def describe_result(ev: Evaluation | None) -> str:
    if ev is None:
        return "not evaluated yet"
    if ev.status != "ok":
        return f"{ev.status}: {ev.reason}"
    parts = [f"{ev.time_ms:.4g} ms ({ev.timing_kind})", f"{ev.speedup:.2f}x eager"]
    if ev.speedup_compile:
        parts.append(f"{ev.speedup_compile:.2f}x torch.compile")
    if ev.roofline_fraction is not None:
        parts.append(f"{ev.roofline_fraction:.0%} of roofline ({ev.bottleneck}-bound)")
    return ", ".join(parts)


class Controller:
    def __init__(self, config: Config, engine: Engine, run_id: int, pool: EvaluatorPool,
                 events: EventSink | None = None):
        self.cfg = config
        self.engine = engine
        self.run_id = run_id
        self.pool = pool
        self.emit = events or (lambda kind, data: None)
        self.problem = load_problem(config.problem)   # the trusted reference only; candidates never load here
        prices = config.prices
        ideas_cfg, code_cfg = config.role("ideas"), config.role("code")
        self.idea_writer = IdeaWriter(make_provider(ideas_cfg, seed=config.search.seed), ideas_cfg, prices,
                                      self._record_call)
        self.coder = Coder(make_provider(code_cfg, seed=config.search.seed), code_cfg, prices, self._record_call)
        self.stop_reason: str | None = None
        self._t0 = time.monotonic()
        with session_scope(engine) as s:
            self._elapsed_base = s.get(Run, run_id).elapsed_s

    # -- store helpers --------------------------------------------------------------------------------------
    def _record_call(self, row: dict) -> int:
        with session_scope(self.engine) as s:
            call = LLMCall(run_id=self.run_id, **row)
            s.add(call)
            s.flush()
            return call.id

    def _elapsed(self) -> float:
        return self._elapsed_base + time.monotonic() - self._t0

    def _usage(self) -> tuple[int, float]:
        with session_scope(self.engine) as s:
            return usage(s, self.run_id)

    def _kernel_count(self) -> int:
        with session_scope(self.engine) as s:
            return kernel_count(s, self.run_id)

    def _best(self) -> Evaluation | None:
        with session_scope(self.engine) as s:
            return s.exec(select(Evaluation).join(Kernel).where(Kernel.run_id == self.run_id,
                                                                Evaluation.status == "ok")
                          .order_by(Evaluation.speedup.desc())).first()

    def _save_progress(self) -> None:
        with session_scope(self.engine) as s:
            run = s.get(Run, self.run_id)
            run.elapsed_s = self._elapsed()
            s.add(run)

    # -- stop rules -----------------------------------------------------------------------------------------
    def _check_budgets(self) -> str | None:
        b = self.cfg.budgets
        if self.stop_reason:
            return self.stop_reason
        if self._wall_time_spent():
            return "budget_wall_time"
        if b.tokens or b.dollars:
            tok, cost = self._usage()
            if b.tokens and tok >= b.tokens:
                return "budget_tokens"
            if b.dollars and cost >= b.dollars:
                return "budget_dollars"
        if b.evaluations and self._kernel_count() >= b.evaluations:
            return "budget_evaluations"
        return self._check_targets_only()

    # -- evaluation -----------------------------------------------------------------------------------------
    async def _evaluate(self, kernel_id: int, code: str) -> None:
        def start() -> bool:
            if not self._may_start():
                return False
            self.emit("evaluating", {"kernel_id": kernel_id})
            return True

        result = await self.pool.evaluate(code, self.problem.ref, may_start=start)
        if result is None:   # the wall-time budget ran out while it waited: stored, left queued
            self.emit("not_started", {"kernel_id": kernel_id, "reason": self.stop_reason or "budget_wall_time"})
            return
        detail = result.pop("detail", {}) or {}
        row = {k: result.get(k) for k in EVAL_COLUMNS}
        with session_scope(self.engine) as s:
            ev = Evaluation(kernel_id=kernel_id, detail_json=json.dumps(detail, default=str), **row)
            s.add(ev)
        self._save_progress()
        self.emit("evaluated", {"kernel_id": kernel_id, "status": row["status"], "speedup": row["speedup"],
                                "reason": row["reason"]})
        stop = self._check_targets_only()
        if stop:
            self.stop_reason = stop

    def _wall_time_spent(self) -> bool:
        wall = self.cfg.budgets.wall_time_s
        return bool(wall and self._elapsed() >= wall)

    def _may_start(self) -> bool:
        """Whether a candidate that got a free evaluation slot starts now. Not past the wall-time budget, and not
        after a target was reached: a round's later candidates wait for slots, so checking only between rounds
        let a 35 s budget run for 156 s (two waves of minute-long matmul evaluations)."""
        return not (self.stop_reason or self._wall_time_spent())

    def _check_targets_only(self) -> str | None:
        t = self.cfg.targets
        if not (t.speedup or t.roofline_fraction):
            return None
        best = self._best()
        if best is None:
            return None
        if t.speedup and best.speedup and best.speedup >= t.speedup:
            return "target_speedup"
        if t.roofline_fraction and best.roofline_fraction and best.roofline_fraction >= t.roofline_fraction:
            return "target_roofline"
        return None

    async def _evaluate_queued(self) -> None:
        with session_scope(self.engine) as s:
            queued = s.exec(select(Kernel).where(Kernel.run_id == self.run_id)
                            .where(~Kernel.id.in_(select(Evaluation.kernel_id)))).all()
        if queued:
            self.emit("queued", {"n": len(queued)})
            await asyncio.gather(*(self._evaluate(k.id, k.code) for k in queued))

    # -- rounds ---------------------------------------------------------------------------------------------
    def _ensure_starter(self) -> None:
        with session_scope(self.engine) as s:
            if s.exec(select(Kernel.id).where(Kernel.run_id == self.run_id)).first() is not None:
                return
            code = self.cfg.starter.read_text() if self.cfg.starter else self.problem.starter_source
            s.add(Kernel(run_id=self.run_id, round=0, code=code, code_hash=code_hash(code)))

    def _seeds(self) -> list[SeedView]:
        with session_scope(self.engine) as s:
            rows = s.exec(select(Kernel, Evaluation).join(Evaluation, Evaluation.kernel_id == Kernel.id)
                          .where(Kernel.run_id == self.run_id, Evaluation.status == "ok")).all()
            scored = [Scored(k.id, k.idea_id, ev.speedup or 0.0) for k, ev in rows]
            chosen = pick_seeds(scored, self.cfg.search.seeds_per_round)
            if not chosen:   # nothing correct yet: seed from the starter, failures and all
                k = s.exec(select(Kernel).where(Kernel.run_id == self.run_id).order_by(Kernel.id)).first()
                ev = s.exec(select(Evaluation).where(Evaluation.kernel_id == k.id)).first()
                return [SeedView(k.id, k.code, describe_result(ev))]
            by_id = {k.id: (k, ev) for k, ev in rows}
            return [SeedView(c.kernel_id, by_id[c.kernel_id][0].code, describe_result(by_id[c.kernel_id][1]))
                    for c in chosen]

    def _tried(self) -> list[str]:
        with session_scope(self.engine) as s:
            ideas = s.exec(select(Idea).where(Idea.run_id == self.run_id).order_by(Idea.id)).all()
            rows = s.exec(select(Kernel.idea_id, Evaluation).join(Evaluation, Evaluation.kernel_id == Kernel.id)
                          .where(Kernel.run_id == self.run_id)).all()
        by_idea: dict[int, list[Evaluation]] = {}
        for idea_id, ev in rows:
            by_idea.setdefault(idea_id, []).append(ev)
        out = []
        for idea in ideas:
            evs = by_idea.get(idea.id, [])
            ok = [e for e in evs if e.status == "ok"]
            if ok:
                best = max(ok, key=lambda e: e.speedup or 0)
                outcome = f"best branch {best.speedup:.2f}x eager ({len(ok)}/{len(evs)} branches correct)"
            elif evs:
                outcome = "every branch failed: " + "; ".join(sorted({f"{e.status}: {e.reason}"[:160] for e in evs}))
            else:
                outcome = "no branch evaluated"
            out.append(f"{idea.title} (on kernel {idea.parent_kernel_id}): {outcome}")
        return out

    def _codes(self, before_round: int | None = None) -> list[str]:
        """The run's kernels, or only those of rounds before `before_round`."""
        q = select(Kernel.code).where(Kernel.run_id == self.run_id)
        if before_round is not None:
            q = q.where(Kernel.round < before_round)
        with session_scope(self.engine) as s:
            return list(s.exec(q).all())

    def _hints(self) -> dict:
        return {"problem": self.problem.ref, "seen_codes": self._codes()}

    def _code_hints(self, rnd: int) -> dict:
        """The coder's structured hints: the kernels of earlier rounds, which a branch need not write again. Only
        earlier rounds (complete when this one runs), so a resumed round writes the branches it would have."""
        return {"problem": self.problem.ref, "earlier_codes": self._codes(before_round=rnd)}

    def _last_round(self) -> int:
        with session_scope(self.engine) as s:
            return last_round(s, self.run_id)

    def _device_label(self) -> str:
        return "cpu-interpreter" if self.pool.s.mode == "cpu" else "cuda"

    def _timed_case(self) -> str:
        case = self.problem.timed_case if self.pool.s.mode == "cuda" else self.problem.cpu_timed_case()
        return case.describe()

    async def _propose(self, rnd: int) -> None:
        seeds = self._seeds()
        hints = self._hints()
        hints["seeds"] = [{"kernel_id": sd.kernel_id, "code": sd.code} for sd in seeds]
        hints["round"] = rnd
        space = getattr(self.problem.family, "SPACE", None)
        hints["seen_params"] = [space.params_of(c) for c in hints.pop("seen_codes")] if space else []
        n = self.cfg.search.ideas_per_round
        self.emit("round", {"round": rnd, "seeds": [sd.kernel_id for sd in seeds]})
        ideas, call_id, err = await self.idea_writer.propose(
            problem=self.problem.name, reference=self.problem.reference_source, timed_case=self._timed_case(),
            device=self._device_label(), seeds=seeds, tried=self._tried(), n=n, hints=hints)
        if err:
            self.emit("llm_error", {"role": "ideas", "error": err})
        with session_scope(self.engine) as s:
            for idea in ideas:
                s.add(Idea(run_id=self.run_id, round=rnd, parent_kernel_id=idea.seed_kernel_id, title=idea.title,
                           text=idea.description, meta_json=json.dumps(idea.meta), llm_call_id=call_id,
                           branches_wanted=self.cfg.search.branches_per_idea))
        self.emit("ideas", {"round": rnd, "n": len(ideas), "titles": [i.title for i in ideas]})

    async def _code_and_evaluate(self, idea: Idea, branch: int) -> None:
        if self._check_budgets():
            return
        with session_scope(self.engine) as s:
            seed_k = s.get(Kernel, idea.parent_kernel_id) if idea.parent_kernel_id else None
            seed_ev = s.exec(select(Evaluation).where(Evaluation.kernel_id == seed_k.id)).first() if seed_k else None
            siblings = s.exec(select(Evaluation).join(Kernel).where(Kernel.idea_id == idea.id,
                                                                    Evaluation.status != "ok")).all()
        seed_code = seed_k.code if seed_k else (self.problem.starter_source or "")
        out = await self.coder.write(
            problem=self.problem.name, reference=self.problem.reference_source, timed_case=self._timed_case(),
            seed_id=seed_k.id if seed_k else None, seed_code=seed_code, seed_result=describe_result(seed_ev),
            idea={"id": idea.id, "title": idea.title, "description": idea.text, "meta": json.loads(idea.meta_json)},
            branch=branch, branches=idea.branches_wanted,
            sibling_errors=[f"{e.status}: {e.reason}" for e in siblings], hints=self._code_hints(idea.round))
        if out.code is None:
            self.emit("llm_error", {"role": "code", "error": out.error})
            return
        h = code_hash(out.code)
        with session_scope(self.engine) as s:
            if s.exec(select(Kernel.id).where(Kernel.run_id == self.run_id, Kernel.code_hash == h)).first():
                self.emit("duplicate", {"idea_id": idea.id, "branch": branch})
                return
            b = self.cfg.budgets.evaluations
            if b and kernel_count(s, self.run_id) >= b:
                return
            k = Kernel(run_id=self.run_id, idea_id=idea.id, parent_kernel_id=idea.parent_kernel_id,
                       round=idea.round, branch=branch, code=out.code, code_hash=h, llm_call_id=out.llm_call_id,
                       language="cuda" if "load_inline" in out.code else "triton")
            s.add(k)
            s.flush()
            kid = k.id
        await self._evaluate(kid, out.code)

    async def _complete_round(self, rnd: int) -> None:
        """Write every missing branch of the round's open ideas and evaluate what is queued."""
        with session_scope(self.engine) as s:
            ideas = s.exec(select(Idea).where(Idea.run_id == self.run_id, Idea.round == rnd,
                                              Idea.status == "open")).all()
            have = {(i, b) for i, b in s.exec(select(Kernel.idea_id, Kernel.branch)
                                              .where(Kernel.run_id == self.run_id, Kernel.round == rnd)).all()}
        tasks = []
        for idea in ideas:
            for b in range(idea.branches_wanted):
                if (idea.id, b) not in have:
                    tasks.append(self._code_and_evaluate(idea, b))
        await asyncio.gather(self._evaluate_queued(), *tasks)
        if not self._check_budgets():
            with session_scope(self.engine) as s:
                for idea in ideas:
                    idea.status = "coded"
                    s.add(idea)

    async def run(self) -> str:
        try:
            return await self._run()
        except AuthError:
            with session_scope(self.engine) as s:
                run = s.get(Run, self.run_id)
                run.status, run.stop_reason = "interrupted", "auth_error"
                run.elapsed_s = self._elapsed()
                s.add(run)
            raise

    async def _run(self) -> str:
        self._ensure_starter()
        await self._evaluate_queued()
        rnd = self._last_round()
        if rnd > 0:
            await self._complete_round(rnd)   # a resumed run finishes the round it was killed in
        while True:
            reason = self._check_budgets()
            if reason:
                break
            if rnd >= self.cfg.search.rounds:
                reason = "rounds_done"
                break
            rnd += 1
            await self._propose(rnd)
            await self._complete_round(rnd)
        self.stop_reason = reason
        with session_scope(self.engine) as s:
            run = s.get(Run, self.run_id)
            run.status, run.stop_reason, run.finished_at = "finished", reason, utcnow()
            run.elapsed_s = self._elapsed()
            s.add(run)
        self.emit("finished", {"reason": reason})
        return reason
