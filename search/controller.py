"""The async controller: one run, round by round, written to the store as each step happens.

Each round: the run's strategy (search/strategies.py) picks the round's parents and its shape; the idea writer
gets those seeds and the ideas already tried with their outcomes; an idea its parent's lineage has already tried is
dropped; the coder turns each idea into branches concurrently; each branch goes to the evaluator pool as soon as its
code exists; results are stored as they arrive. Before a round's parents are chosen, and before the run finishes,
the finalists are re-timed (search/finalists.py); kernels are ranked by their own time and every speedup shown is
the run's reference figure over it (store/clock.py). Resume is a query: ideas with branches still to write are
written, kernels with no evaluation are evaluated, then the rounds go on. The machinery here is the same for every
strategy.
"""
from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import time
from typing import Callable

from sqlalchemy.engine import Engine
from sqlmodel import Session

from kernelsearch.agent.base import CodeTask, IdeaBrief, IdeaTask, SeedTask
from kernelsearch.agent.errors import AuthError
from kernelsearch.agent.providers import make_provider
from kernelsearch.agent.roles import Coder, FailedKernel, IdeaWriter, SeedView, prompt
from kernelsearch.families import load_problem, starters
from kernelsearch.families.feasibility import refuse_infeasible
from kernelsearch.judge.static import kernel_language
from kernelsearch.sandbox.pool import EvaluatorPool
from kernelsearch.search import strategies
from kernelsearch.search.describe import describe_result, device_prompt, not_judged, why
from kernelsearch.search.finalists import Retimer
from kernelsearch.search.settings import SearchSetup
from kernelsearch.store import Evaluation, Idea, session_scope
from kernelsearch.store import queries as q
from kernelsearch.store.models import utcnow
from kernelsearch.store.status import Status

EventSink = Callable[[str, dict], None]

FIRST = "first_kernel"            # the meta key that marks an idea as "first kernels from the reference"
FIRST_TITLE = "First kernels from the reference"
FAILURES_SHOWN = 3                # earlier failed first kernels shown to the coder of a first-kernel round
ERROR_CHARS = 1500                # of each one's error text (its end: a traceback's last lines say the most)
STALL_ROUNDS = 5                  # rounds in a row with no new kernel and no fresh parent: the search stops, "stalled"
HARNESS_TRIES = 2                 # evaluations of a kernel whose judge fails in its own work (harness_error), each
#                                   time it is queued: the device's free memory changes as other evaluations end

def code_hash(code: str) -> str:
    return hashlib.sha256(code.strip().encode()).hexdigest()[:16]


def language_of(code: str) -> str:
    """The kernel's language as the static check reads its source: "triton" or "cuda". Source that does not parse,
    or has no kernel of its own, is stored as "triton", the column's default (its evaluation rejects it)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "triton"
    return kernel_language(tree) or "triton"


def _attempt(result) -> dict:
    """One evaluation that ended in harness_error, as `harness_attempts` keeps it."""
    return {"reason": result.reason, "stage": result.stage, "error_text": (result.error_text or "")[-1500:] or None,
            "at": utcnow().isoformat(timespec="seconds")}


def _attempts_of(ev: Evaluation) -> list[dict]:
    """A stored harness_error's attempts: those its detail keeps, then itself."""
    try:
        detail = json.loads(ev.detail_json or "{}")
    except ValueError:
        detail = {}
    kept = [a for a in detail.get("harness_attempts") or [] if isinstance(a, dict)]
    at = ev.created_at.isoformat(timespec="seconds") if ev.created_at else None
    return kept + [{"reason": ev.reason, "stage": ev.stage, "error_text": (ev.error_text or "")[-1500:] or None,
                    "at": at}]


class Controller:
    def __init__(self, setup: SearchSetup, engine: Engine, run_id: int, pool: EvaluatorPool,
                 events: EventSink | None = None):
        self.setup = setup
        self.engine = engine
        self.run_id = run_id
        self.pool = pool
        self.emit = events or (lambda kind, data: None)
        self.problem = load_problem(setup.problem)   # the trusted reference only; candidates never load here
        seed = setup.search.seed
        # the roles say what the config lets candidates call in torch in the contract they give the LLM
        # and the language the kernels are written in (search.language) and the device, from its measured ceilings
        lang = setup.search.language
        self._device_prompt = lambda: device_prompt(engine, run_id, pool.mode)
        self.idea_writer = IdeaWriter(make_provider(setup.ideas, seed=seed), setup.ideas, setup.prices,
                                      self._record_call, allow_torch=setup.allow_torch, language=lang,
                                      device=self._device_prompt)
        self.coder = Coder(make_provider(setup.code, seed=seed), setup.code, setup.prices, self._record_call,
                           allow_torch=setup.allow_torch, language=lang, device=self._device_prompt)
        self.stop_reason: str | None = None
        self.strategy = setup.search.strategy
        self._spent: set[int] = set()   # parents of a round that stored no new kernel (search/strategies.py)
        self._t0 = time.monotonic()
        with session_scope(engine) as s:
            self._elapsed_base = q.run_elapsed(s, run_id)
        # re-timings start while the wall time lasts, whatever else stopped the run (they are not new kernels)
        self.retime = Retimer(engine, run_id, pool, self.problem.ref, timings=setup.search.timings,
                              agree=setup.search.timings_agree, finalists=setup.search.seeds_per_round + 1,
                              emit=self.emit, may_start=lambda: not self._wall_time_spent(),
                              stored=self._save_progress)

    # -- store helpers --------------------------------------------------------------------------------------
    def _record_call(self, row: dict) -> int:
        with session_scope(self.engine) as s:
            return q.add_llm_call(s, self.run_id, row)

    def _add_kernel(self, s: Session, code: str, **fields) -> int:
        """Store a kernel with what its code decides: its hash, and its language as the static check reads it."""
        return q.add_kernel(s, self.run_id, code=code, code_hash=code_hash(code), language=language_of(code),
                            **fields)

    def _elapsed(self) -> float:
        return self._elapsed_base + time.monotonic() - self._t0

    def _usage(self) -> tuple[int, float]:
        with session_scope(self.engine) as s:
            return q.usage(s, self.run_id)

    def _kernel_count(self) -> int:
        with session_scope(self.engine) as s:
            return q.kernel_count(s, self.run_id)

    def _best(self) -> q.KernelRow | None:
        """The run's fastest correct kernel, by its own time."""
        with session_scope(self.engine) as s:
            best = q.best_kernels(s, self.run_id, 1)
        return best[0] if best else None

    def _save_progress(self) -> None:
        with session_scope(self.engine) as s:
            q.save_elapsed(s, self.run_id, self._elapsed())

    # -- stop rules -----------------------------------------------------------------------------------------
    def _check_budgets(self) -> str | None:
        b = self.setup.budgets
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
    async def _evaluate(self, kernel_id: int, code: str, attempts: tuple[dict, ...] = ()) -> None:
        """Evaluate one kernel and store the result. A `harness_error` (the judge's own failure, e.g. out of memory
        building references) says nothing about the kernel: it is tried HARNESS_TRIES times in all, the failed
        attempts (with earlier runs', `attempts`) kept in the detail as `harness_attempts`; one that stays is stored
        (a resumed run evaluates it again)."""
        def start() -> bool:
            if not self._may_start():
                return False
            self.emit("evaluating", {"kernel_id": kernel_id})
            return True

        # a point the family's space knows cannot run at some case is refused here: no worker, no GPU
        result = refuse_infeasible(self.problem, code)
        earlier = list(attempts)
        tries, pending = 0, None
        while result is None and tries < HARNESS_TRIES:
            tries += 1
            got = await self.pool.evaluate(code, self.problem.ref, may_start=start)
            if got is None:   # not started (the wall-time budget): an unjudged result in hand is stored as it is
                break
            result = got
            if got.status == Status.harness_error and tries < HARNESS_TRIES:
                self.emit("harness_retry", {"kernel_id": kernel_id, "reason": got.reason})
                earlier.append(_attempt(got))
                result, pending = None, got
        if result is None and pending is not None:   # the second try did not start: the first one is stored
            result = pending
            earlier.pop()
        if result is None:   # the wall-time budget ran out while it waited: stored, left queued
            self.emit("not_started", {"kernel_id": kernel_id, "reason": self.stop_reason or "budget_wall_time"})
            return
        if earlier:
            result.detail["harness_attempts"] = earlier
        with session_scope(self.engine) as s:
            q.add_evaluation(s, result.row(kernel_id))
            q.set_language(s, kernel_id, (result.detail or {}).get("language"))   # as its evaluation found it
            shown = q.kernel_row(s, kernel_id)   # the run's reference figure over its time: the speedup shown
        self._save_progress()
        self.emit("evaluated", {"kernel_id": kernel_id, "status": result.status.value, "speedup": shown.speedup,
                                "reason": result.reason})
        stop = self._check_targets_only()
        if stop:
            self.stop_reason = stop

    def _wall_time_spent(self) -> bool:
        wall = self.setup.budgets.wall_time_s
        return bool(wall and self._elapsed() >= wall)

    def _may_start(self) -> bool:
        """Whether a candidate that got a free evaluation slot starts now. Not past the wall-time budget, and not
        after a target was reached: a round's later candidates wait for slots, so checking only between rounds
        let a 35 s budget run for 156 s (two waves of minute-long matmul evaluations)."""
        return not (self.stop_reason or self._wall_time_spent())

    def _check_targets_only(self) -> str | None:
        t = self.setup.targets
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

    async def _evaluate_queued(self, unjudged: bool = False) -> None:
        """Evaluate the kernels with no evaluation; with `unjudged`, also those whose stored evaluation is a
        harness_error (the judge failed in its own work: a resumed run judges them again)."""
        with session_scope(self.engine) as s:
            work = [(k.id, k.code, ()) for k in q.queued_kernels(s, self.run_id)]
            if unjudged:
                again = [(k.id, k.code, tuple(_attempts_of(ev))) for k, ev in q.unjudged_kernels(s, self.run_id)]
                if again:
                    self.emit("unjudged", {"n": len(again), "kernels": [kid for kid, _, _ in again]})
                work += again
        if work:
            self.emit("queued", {"n": len(work)})
            await asyncio.gather(*(self._evaluate(kid, code, tried) for kid, code, tried in work))

    # -- rounds ---------------------------------------------------------------------------------------------
    def _ensure_starter(self) -> None:
        """Round 0's seed: the starter kernel, or, for a problem with no starter, an idea asking the coder for first
        kernels from the reference (written by `_complete_round(0)`, so a resumed run writes what is missing)."""
        with session_scope(self.engine) as s:
            if q.first_kernel(s, self.run_id) is not None or q.last_round(s, self.run_id) > 0:
                return
            if self.setup.first_from_reference:
                if not q.ideas_with_evaluations(s, self.run_id):   # a resumed run has its round-0 idea
                    self._add_first_idea(s, 0)
                return
            # the config's starter file, else the family's in search.language (any: both, where it has both)
            codes = [self.setup.starter.read_text()] if self.setup.starter else starters(self.problem,
                                                                                         self.setup.search.language)
            for code in codes:
                self._add_kernel(s, code, round=0)

    def _add_first_idea(self, s: Session, rnd: int, sample: bool = False) -> None:
        again = "" if rnd == 0 else " (again: none of the earlier ones is correct)"
        if sample and self._any_correct():
            again = f" ({self.strategy}: independent samples, none built on an earlier kernel)"
        q.add_idea(s, self.run_id, round=rnd, parent_kernel_id=None, title=FIRST_TITLE + again,
                   text="The coder writes first correct kernels from the reference alone; the correct ones seed the "
                        "next round.", meta_json=json.dumps({FIRST: True, "strategy": self.strategy}),
                   llm_call_id=None,
                   branches_wanted=self.setup.first_kernels)

    def _any_correct(self) -> bool:
        with session_scope(self.engine) as s:
            return q.has_correct(s, self.run_id)

    def _first_round(self, rnd: int, sample: bool = False) -> None:
        """A round of first kernels from the reference: round 0, a later one while none is correct yet, or every
        round of best_of_n with no starter."""
        with session_scope(self.engine) as s:
            self._add_first_idea(s, rnd, sample)
        self.emit("first_kernels", {"round": rnd, "n": self.setup.first_kernels})

    def _failed_first(self, before_round: int) -> list[FailedKernel]:
        with session_scope(self.engine) as s:
            rows = q.failed_kernels(s, self.run_id, before_round=before_round, limit=FAILURES_SHOWN)
        return [FailedKernel(k.id, k.code, ev.status, ev.reason or "", (ev.error_text or "")[-ERROR_CHARS:])
                for k, ev in rows]

    def _tree(self) -> q.RunTree:
        with session_scope(self.engine) as s:
            return q.tree(s, self.run_id)

    def _plan(self, rnd: int) -> strategies.Plan:
        return strategies.plan(self._tree(), self.setup, rnd, frozenset(self._spent))

    def _seeds(self, parents: tuple[int, ...], tree: q.RunTree | None = None) -> list[SeedView]:
        """The round's parents as the idea writer is shown them: code and measured result (or the failure)."""
        tree = tree or self._tree()
        out = []
        with session_scope(self.engine) as s:
            for kid in parents:
                k = q.get_kernel(s, kid)
                out.append(SeedView(k.id, k.code, describe_result(tree.kernels.get(kid))))
        return out

    def _tried(self, tree: q.RunTree | None = None) -> list[str]:
        """The run's ideas with their outcomes, for the idea writer (`tree`: the run's, if already read)."""
        tree = tree or self._tree()
        with session_scope(self.engine) as s:
            tried = q.ideas_with_evaluations(s, self.run_id)
        out = []
        for idea, all_evs in tried:
            # a branch the judge could not evaluate (harness_error) is neither correct nor failed: left out here
            evs = [e for e in all_evs if e.status != Status.harness_error]
            unjudged = [e for e in all_evs if e.status == Status.harness_error]
            ok = [e for e in evs if e.status == Status.ok]
            speedups = [tree.kernels[e.kernel_id].speedup for e in ok if e.kernel_id in tree.kernels]
            best = max((x for x in speedups if x is not None), default=None)   # one reference figure: the fastest
            if ok and best is not None:
                outcome = f"best branch {best:.2f}x eager ({len(ok)}/{len(evs)} branches correct)"
            elif ok:
                outcome = f"{len(ok)}/{len(evs)} branches correct"
            elif unjudged and not evs:
                outcome = f"no branch judged ({len(unjudged)} {not_judged(unjudged[0])})"
            elif evs:   # why, in the idea writer's words (prompts/tried_failed.md): each distinct failure once
                out.append(prompt("tried_failed").substitute(
                    title=idea.title, on=self._on(idea), n=len(evs),
                    why="; ".join(sorted({why(e) for e in evs}))).strip())
                continue
            else:
                outcome = "no branch evaluated"
            out.append(f"{idea.title} ({self._on(idea)}): {outcome}")
        return out

    @staticmethod
    def _on(idea: Idea) -> str:
        return f"on kernel {idea.parent_kernel_id}" if idea.parent_kernel_id else "from the reference"

    def _codes(self, before_round: int | None = None) -> list[str]:
        """The run's kernels, or only those of rounds before `before_round`."""
        with session_scope(self.engine) as s:
            return q.run_codes(s, self.run_id, before_round)

    def _idea_task(self, rnd: int, seeds: list[SeedView], n: int, tree: q.RunTree) -> IdeaTask:
        """The idea writer's task: each seed with the ideas its lineage tried (title, text), which a provider can be
        told not to repeat, and every kernel the run has written, which an idea need not redo."""
        return IdeaTask(problem=self.problem.ref, round=rnd, n=n, seen_codes=tuple(self._codes()), seeds=tuple(
            SeedTask(sd.kernel_id, sd.code, tuple(strategies.lineage_texts(tree, sd.kernel_id))) for sd in seeds),
            language=self.setup.search.language)

    def _code_task(self, idea: Idea, brief: IdeaBrief, branch: int, seed_code: str) -> CodeTask:
        """The coder's task, with the kernels of earlier rounds, which a branch need not write again. Only earlier
        rounds (complete when this one runs), so a resumed round writes the branches it would have."""
        return CodeTask(problem=self.problem.ref, idea=brief, branch=branch, branches=idea.branches_wanted,
                        seed_code=seed_code, earlier_codes=tuple(self._codes(before_round=idea.round)),
                        language=self.setup.search.language)

    def _last_round(self) -> int:
        with session_scope(self.engine) as s:
            return q.last_round(s, self.run_id)

    def _device_label(self) -> str:
        return "cpu-interpreter" if self.pool.mode == "cpu" else "cuda"

    def _timed_case(self) -> str:
        case = self.problem.timed_case if self.pool.mode == "cuda" else self.problem.cpu_timed_case()
        return case.describe()

    async def _propose(self, rnd: int, plan: strategies.Plan) -> None:
        tree = self._tree()
        seeds = self._seeds(plan.parents, tree)
        task = self._idea_task(rnd, seeds, plan.ideas, tree)
        self.emit("round", {"round": rnd, "seeds": [sd.kernel_id for sd in seeds], "strategy": self.strategy})
        ideas, call_id, err = await self.idea_writer.propose(
            problem=self.problem.name, reference=self.problem.reference_source, timed_case=self._timed_case(),
            device=self._device_label(), seeds=seeds, tried=self._tried(tree), task=task)
        if err:
            self.emit("llm_error", {"role": "ideas", "error": err})
        tried = {p: strategies.lineage_ideas(tree, p) for p in plan.parents}
        kept = []
        for idea in ideas:   # an idea the parent's lineage already tried is not tried again, nor one twice a round
            key = strategies.idea_key(idea.title, idea.description)
            seen = tried.setdefault(idea.seed_kernel_id, strategies.lineage_ideas(tree, idea.seed_kernel_id))
            if key in seen:
                self.emit("repeat_idea", {"round": rnd, "title": idea.title, "parent": idea.seed_kernel_id})
                continue
            seen.add(key)
            kept.append(idea)
        with session_scope(self.engine) as s:
            for idea in kept:
                q.add_idea(s, self.run_id, round=rnd, parent_kernel_id=idea.seed_kernel_id, title=idea.title,
                           text=idea.description, meta_json=json.dumps({**idea.meta, "strategy": self.strategy}),
                           llm_call_id=call_id, branches_wanted=plan.branches)
        self.emit("ideas", {"round": rnd, "n": len(kept), "titles": [i.title for i in kept]})

    async def _code_and_evaluate(self, idea: Idea, branch: int) -> None:
        if self._check_budgets():
            return
        with session_scope(self.engine) as s:
            seed_k = q.get_kernel(s, idea.parent_kernel_id) if idea.parent_kernel_id else None
            seed_row = q.kernel_row(s, seed_k.id) if seed_k else None
            siblings = q.failed_evaluations_of_idea(s, idea.id)
        brief = IdeaBrief(id=idea.id, title=idea.title, description=idea.text, meta=json.loads(idea.meta_json))
        if brief.meta.get(FIRST):   # written from the reference: no seed
            out = await self.coder.write_first(
                problem=self.problem.name, reference=self.problem.reference_source, timed_case=self._timed_case(),
                failures=self._failed_first(idea.round), task=self._code_task(idea, brief, branch, seed_code=""))
        else:
            seed_code = seed_k.code if seed_k else (self.problem.starter_source or "")
            out = await self.coder.write(
                problem=self.problem.name, reference=self.problem.reference_source, timed_case=self._timed_case(),
                seed_id=seed_k.id if seed_k else None, seed_result=describe_result(seed_row),
                sibling_errors=[f"{e.status}: {e.reason}" for e in siblings],
                task=self._code_task(idea, brief, branch, seed_code))
        if out.code is None:
            self.emit("llm_error", {"role": "code", "error": out.error})
            return
        h = code_hash(out.code)
        with session_scope(self.engine) as s:
            if q.kernel_with_hash(s, self.run_id, h):
                self.emit("duplicate", {"idea_id": idea.id, "branch": branch})
                return
            b = self.setup.budgets.evaluations
            if b and q.kernel_count(s, self.run_id) >= b:
                return
            kid = self._add_kernel(s, out.code, idea_id=idea.id, parent_kernel_id=idea.parent_kernel_id,
                                   round=idea.round, branch=branch, llm_call_id=out.llm_call_id)
        await self._evaluate(kid, out.code)

    async def _complete_round(self, rnd: int) -> None:
        """Write every missing branch of the round's open ideas and evaluate what is queued."""
        with session_scope(self.engine) as s:
            ideas = q.open_ideas(s, self.run_id, rnd)
            have = q.branches_written(s, self.run_id, rnd)
        tasks = []
        for idea in ideas:
            for b in range(idea.branches_wanted):
                if (idea.id, b) not in have:
                    tasks.append(self._code_and_evaluate(idea, b))
        await asyncio.gather(self._evaluate_queued(), *tasks)
        if not self._check_budgets():
            with session_scope(self.engine) as s:
                q.mark_ideas_coded(s, [idea.id for idea in ideas])

    async def run(self) -> str:
        try:
            return await self._run()
        except AuthError:
            with session_scope(self.engine) as s:
                q.interrupt_run(s, self.run_id, "auth_error", self._elapsed())
            raise

    async def _run(self) -> str:
        self._ensure_starter()
        await self._evaluate_queued(unjudged=True)   # a resumed run's queued and unjudged kernels
        rnd = self._last_round()
        if rnd > 0 or self.setup.first_from_reference:
            if rnd == 0:
                self.emit("first_kernels", {"round": 0, "n": self.setup.first_kernels})
            await self._complete_round(rnd)   # round 0's first kernels; or the round a resumed run was killed in
        idle = 0   # rounds in a row that stored no kernel from parents all spent already (search/strategies.py)
        while True:
            reason = self._check_budgets()
            if reason:
                break
            if rnd >= self.setup.search.rounds:
                reason = "rounds_done"
                break
            if idle >= STALL_ROUNDS:
                reason = "stalled"
                break
            rnd += 1
            before = self._kernel_count()
            await self.retime(f"round {rnd}")   # the finalists, before the round's parents are chosen
            plan = self._plan(rnd)
            if self.setup.first_from_reference and not self._any_correct():
                self.emit("no_correct", {"round": rnd})   # the coder of this round sees the failures
                self._first_round(rnd)
            elif plan.first:
                self._first_round(rnd, sample=True)
            else:
                await self._propose(rnd, plan)
            await self._complete_round(rnd)
            if self._kernel_count() == before:   # parents with nothing new are spent; with none fresh left, stuck
                idle += 0 if set(plan.parents) - self._spent else 1
                self._spent.update(plan.parents)
                self.emit("spent", {"round": rnd, "kernels": sorted(plan.parents)})
            else:
                idle = 0
        self.stop_reason = reason
        await self.retime("finish")   # the finalists again (new ones since the last round), before the best is final
        if not self._any_correct():
            self.emit("none_correct", {"reason": reason})
        with session_scope(self.engine) as s:
            q.finish_run(s, self.run_id, reason, self._elapsed())
        self.emit("finished", {"reason": reason})
        return reason
