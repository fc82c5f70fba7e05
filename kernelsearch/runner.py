"""Starting and resuming runs: the glue between config, store, evaluator pool and controller."""
from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime
from pathlib import Path

from rich.console import Console
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from kernelsearch.agent.errors import AuthError
from kernelsearch.config import Config, parse_config
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings, detect_mode
from kernelsearch.search.controller import Controller
from kernelsearch.store import Run, open_store, session_scope
from kernelsearch.store.database import StoreError
from kernelsearch.store.integrity import damaged_rows, settle_damaged_kernels, summary
from kernelsearch.store.queries import kernel_count, last_round, unjudged_kernels
from kernelsearch.views.live import LiveView


class RunError(Exception):
    """A run cannot be started or resumed; the message says why."""


def pool_for(cfg: Config) -> EvaluatorPool:
    """The config's evaluation backend: this machine's pool, or the same pool in actors of a Ray cluster."""
    if cfg.evaluation.backend == "ray":
        from kernelsearch.sandbox.ray_backend import RayPool

        keys = tuple(sorted({cfg.role(r).api_key_env for r in ("ideas", "code")} - {None}))
        try:
            return RayPool(PoolSettings(concurrency=cfg.search.concurrency, evaluation=cfg.evaluation.judge_settings()),
                           cfg.ray, device=cfg.device, hide=keys)
        except RuntimeError as err:   # RayBackendError, or torch's word on device: cuda
            raise RunError(str(err)) from None
    mode, gpus = detect_mode(cfg.device)
    return EvaluatorPool(PoolSettings(mode=mode, gpus=gpus, concurrency=cfg.search.concurrency,
                                      evaluation=cfg.evaluation.judge_settings()))


def check_problem(cfg: Config):
    """Load the problem and run its reference on its own inputs: a file that does not load, or a reference that
    fails, is a RunError of one line. Refuse a problem whose reference output is (near) constant: zeros or a
    constant would pass it."""
    from kernelsearch.families import load_problem
    from kernelsearch.judge.problem import ProblemError, describe_exception
    from kernelsearch.problem_check import check_problem_variance, interpreter_size_error

    try:
        problem = load_problem(cfg.problem)
        if detect_mode(cfg.device)[0] == "cpu":   # before the variance check draws its inputs in this process
            too_large = interpreter_size_error(problem)
            if too_large:
                raise RunError(too_large)
    except (ProblemError, RuntimeError) as err:
        raise RunError(str(err)) from None
    try:
        degenerate, message = check_problem_variance(problem)
    except ProblemError as err:
        raise RunError(str(err)) from None
    except Exception as err:   # noqa: BLE001 - whatever the reference raises is the problem's, said in one line
        raise RunError(f"problem {cfg.problem}: the reference failed on its own inputs: "
                       f"{describe_exception(err)}") from None
    if degenerate and not cfg.evaluation.allow_degenerate_problem:
        raise RunError(f"{message} (set evaluation.allow_degenerate_problem: true to search it anyway)")
    if "offline" in (cfg.role("ideas").provider, cfg.role("code").provider):
        from kernelsearch.generators.match import Unmatched, match_problem

        try:   # what the offline provider would search: a family's space, or one the reference's graph matches
            match_problem(problem)
        except Unmatched as err:
            raise RunError(f"llm.provider: offline: {err}") from None
    return problem


def _shapes_note(problem) -> str | None:
    """What a KernelBench file's correctness covers: its derived cases, or only its own case."""
    from kernelsearch.judge.problem import OWN_ONLY

    if problem.family is not None:
        return None
    if [c.name for c in problem.cases] == [OWN_ONLY]:
        return (f"problem {problem.name}: only its own case is checked for correctness (its sizes are not "
                "module-level integers, so no other sizes can be derived)")
    return (f"problem {problem.name}: correctness on " + ", ".join(c.describe() for c in problem.cases)
            + f"; timed: {problem.timed_case.describe()} (on the CPU: {problem.cpu_timed_case().describe()})")


def _open(db: Path):
    """The store, checked page by page (a run or resume is about to write to it); a damaged one is a RunError."""
    try:
        return open_store(db, verify=True)
    except StoreError as err:
        raise RunError(str(err)) from None


def announce(console: Console, head: str, status: str | None, again: str) -> bool:
    """One named run of a batch or an experiment, by its stored status (None: not in the store): say whether it is
    started, resumed or, finished, left as it is (`again`: "not searched again"); whether to drive it."""
    if status == "finished":
        console.print(f"{head}: finished, {again}", markup=False)
        return False
    console.print(f"{head}: starting" if status is None else f"{head}: resuming ({status})", markup=False)
    return True


def start_or_resume(cfg: Config, db: Path, name: str, status: str | None, console: Console) -> str:
    """Start the run `name` with `cfg` where the store has none (status None), else resume the stored one."""
    return start_run(cfg, db, name, console) if status is None else resume_run(name, db, console)


def start_run(cfg: Config, db: Path, name: str | None, console: Console) -> str:
    engine, run_id, pool, name = prepare_run(cfg, db, name, console)
    return _drive(cfg, engine, run_id, pool, console, name)


def prepare_run(cfg: Config, db: Path, name: str | None, console: Console, pool: EvaluatorPool | None = None):
    """A new run's row, checked and stored, ready to drive: (engine, run id, pool, name). `pool`: one to share
    (bench's problems at once), else the config's own."""
    problem = check_problem(cfg)
    engine = _open(db)
    name = name or cfg.name or f"{Path(cfg.problem).stem}-{datetime.now():%Y%m%d-%H%M%S}"
    exists = f"a run named {name!r} already exists in {db}; `kernelsearch resume {name}` continues it"
    try:
        with session_scope(engine) as s:
            if s.exec(select(Run).where(Run.name == name)).first():
                raise RunError(exists)
            pool = pool or pool_for(cfg)
            run = Run(name=name, problem=cfg.problem, config_json=cfg.model_dump_json(),
                      device="cpu-interpreter" if pool.s.mode == "cpu" else "cuda")
            s.add(run)
            s.flush()
            run_id = run.id
    except IntegrityError:   # another `run` of the same name stored its row between our check and our insert
        raise RunError(exists) from None
    console.print(f"run {name} in {db}: problem {cfg.problem}, "
                  f"provider {cfg.role('ideas').provider}/{cfg.role('code').provider}, device "
                  + ("cpu: Triton interpreter, timings labelled cpu-interpreter (not GPU timings)"
                     if pool.s.mode == "cpu" else f"cuda x{len(pool.s.gpus)}"), markup=False)
    if hasattr(pool, "describe"):   # the Ray backend: where the evaluations go
        actors = pool.describe()
        console.print(f"evaluations on a Ray cluster: {len(actors)} actors on "
                      f"{len({a['node'] for a in actors})} node(s)", markup=False)
    note = _shapes_note(problem)
    if note:
        console.print(note, markup=False)
    _warn_unpriced(cfg, console)
    return engine, run_id, pool, name


def _warn_unpriced(cfg: Config, console: Console) -> None:
    from kernelsearch.agent.cost import unpriced_models

    missing = unpriced_models(cfg.prices, [cfg.role("ideas"), cfg.role("code")])
    if missing:
        budget = " The dollar budget cannot count them." if cfg.budgets.dollars else ""
        console.print(f"warning: no price for {', '.join(missing)} in `prices:`; their calls are recorded as "
                      f"unpriced.{budget}", markup=False)


def resume_run(name: str, db: Path, console: Console, *, evaluations: int | None = None,
               wall_time_s: float | None = None, rounds: int | None = None) -> str:
    cfg, engine, run_id = prepare_resume(name, db, console, evaluations=evaluations, wall_time_s=wall_time_s,
                                         rounds=rounds)
    return _drive(cfg, engine, run_id, pool_for(cfg), console, name)


def prepare_resume(name: str, db: Path, console: Console, *, evaluations: int | None = None,
                   wall_time_s: float | None = None, rounds: int | None = None):
    """Continue a run: (config, engine, run id), the run marked running, ready to drive. An interrupted run picks
    up where it stopped; a finished one continues only with a larger budget (`evaluations`, `wall_time_s`,
    `rounds`), which is stored in the run's config. Its queued kernels are evaluated first and its last round
    completed, as after a kill; wall time counts from the run's start."""
    if not Path(db).exists():
        raise RunError(f"no store at {db}")
    engine = _open(db)
    with session_scope(engine) as s:
        run = s.exec(select(Run).where(Run.name == name)).first()
        if run is None:
            raise RunError(f"no run named {name!r} in {db}")
        damaged = damaged_rows(s, run.id)
        try:
            raw = json.loads(run.config_json)
        except (TypeError, ValueError) as err:
            raise RunError(f"run {name!r} in {db} is damaged: its stored config is not JSON ({err})") from None
        extended = _extend(s, run, raw, evaluations, wall_time_s, rounds)
        if run.status == "finished" and not extended:
            unjudged = len(unjudged_kernels(s, run.id))
            note = (f"; its {unjudged} kernel{'s' if unjudged > 1 else ''} the judge could not evaluate "
                    "(harness_error) are evaluated again when it goes on") if unjudged else ""
            raise RunError(f"run {name!r} already finished ({run.stop_reason}); to go on, give it more: "
                           f"`kernelsearch resume {name} --evaluations N` (or --wall-time S, --rounds R){note}")
        cfg = parse_config(raw, source=f"run {name!r}'s stored config")
        check_problem(cfg)   # before the run is marked running: a problem file broken since is refused here
        if damaged:   # reported on stderr, one line each; queued kernels that cannot be evaluated are settled
            print(f"warning: {summary(name, damaged)}", file=sys.stderr)
            settled = settle_damaged_kernels(s, damaged)
            if settled:
                print(f"warning: queued kernel{'s' if len(settled) > 1 else ''} {', '.join(f'k{k}' for k in settled)} "
                      "recorded as compile_error (damaged code), not evaluated", file=sys.stderr)
        if extended:
            run.config_json = cfg.model_dump_json()
        was = run.stop_reason if run.status == "finished" else None
        run.status, run.stop_reason, run.finished_at = "running", None, None
        s.add(run)
        run_id = run.id
    console.print(f"resuming run [bold]{name}[/] in {db}" + (f": {', '.join(extended)}" if extended else ""))
    lifted = {"budget_evaluations": evaluations, "budget_wall_time": wall_time_s, "rounds_done": rounds}.get(was)
    if was and lifted is None:
        console.print(f"note: it stopped for {was}, which these budgets do not lift; it may stop again at once",
                      markup=False)
    return cfg, engine, run_id


def _extend(s, run: Run, raw: dict, evaluations: int | None, wall_time_s: float | None,
            rounds: int | None) -> list[str]:
    """Apply larger budgets to a stored config (in place); each must exceed what the run has already spent."""
    done: list[str] = []
    if evaluations is not None:
        made = kernel_count(s, run.id)
        if evaluations <= made:
            raise RunError(f"--evaluations {evaluations}: run {run.name!r} already has {made} kernels; give more")
        raw.setdefault("budgets", {})["evaluations"] = evaluations
        done.append(f"evaluations {made} -> {evaluations}")
    if wall_time_s is not None:
        spent = run.elapsed_s or 0.0
        if wall_time_s <= spent:
            raise RunError(f"--wall-time {wall_time_s:g}: run {run.name!r} has already run {spent:.0f} s; give more")
        raw.setdefault("budgets", {})["wall_time_s"] = wall_time_s
        done.append(f"wall time {spent:.0f} s spent -> {wall_time_s:g} s")
    if rounds is not None:
        last = last_round(s, run.id)
        if rounds <= last:
            raise RunError(f"--rounds {rounds}: run {run.name!r} has already reached round {last}; give more")
        raw.setdefault("search", {})["rounds"] = rounds
        done.append(f"rounds {last} -> {rounds}")
    return done


async def drive_shared(cfg: Config, engine, run_id: int, pool: EvaluatorPool, console: Console, name: str) -> str:
    """One run's controller on a pool other runs share (bench's problems at once, in one event loop): plain lines,
    no live panel; the pool is its owner's to close. An interrupted run is marked so, for resume."""
    def line(kind: str, data: dict) -> None:
        if kind in ("round", "no_correct", "none_correct", "finished"):
            console.print(f"{name}: {kind} {json.dumps(data, default=str)[:160]}", markup=False)

    controller = Controller(cfg.search_setup(), engine, run_id, pool, events=line)
    try:
        return await controller.run()
    except AuthError as err:
        raise RunError(f"{err} (the run is kept; fix the key, then `kernelsearch resume {name}`)") from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        with session_scope(engine) as s:
            run = s.get(Run, run_id)
            if run.status == "running":
                run.status = "interrupted"
                s.add(run)
        raise


def _drive(cfg: Config, engine, run_id: int, pool: EvaluatorPool, console: Console, name: str) -> str:
    view = LiveView(console, engine, run_id, cfg.budgets)   # a live panel on a terminal, plain lines otherwise
    controller = Controller(cfg.search_setup(), engine, run_id, pool, events=view)
    try:
        with view:
            return asyncio.run(controller.run())
    except AuthError as err:
        raise RunError(f"{err} (the run is kept; fix the key, then `kernelsearch resume {name}`)") from None
    except KeyboardInterrupt:
        with session_scope(engine) as s:
            run = s.get(Run, run_id)
            run.status = "interrupted"
            s.add(run)
        console.print(f"interrupted; `kernelsearch resume {name}` continues the run")
        raise
    finally:
        pool.close()
