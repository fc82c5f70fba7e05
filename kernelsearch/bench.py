"""`kernelsearch bench`: a folder of KernelBench-format problems searched as one job, into one store.

One run per problem, named `<batch>-<file stem>`, started or resumed with runner.py's functions, one problem after
another (sequential: each run already evaluates its kernels concurrently). Rerunning the same command skips the
problems whose run finished and resumes the interrupted ones. The table and fast_p are computed from the store at
print time, so a rerun prints the same table; no table of its own is stored.

Every problem of the batch is a row of the store from the batch's start, as KernelBench counts fast_p over every
problem of a level: a problem not reached yet is a `pending` run, one that cannot be searched (its file does not
load, its reference fails, the offline provider matches no pattern in it) a `refused` run whose stop_reason is the
reason. Both hold no kernel; a rerun searches them again (the generators may have grown since). So the table printed
here, `report BATCH`, `compare A B` and `runs` count the same problems.

torch.compile is timed beside eager by default (evaluation.compare_compile, on a GPU; `--no-compile` skips it): its
compiled graph is cached per device and problem in the pool's shared inductor cache (sandbox/pool.py), so a batch
compiles each reference once, and every evaluation times it side by side like eager (one figure per run and device,
store/clock.py).
"""
from __future__ import annotations

import asyncio
import glob
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml
from rich.console import Console
from sqlmodel import select

from kernelsearch.config import ConfigError, parse_config
from kernelsearch.run_status import open_read_only, run_status
from kernelsearch.runner import RunError, announce, start_or_resume
from kernelsearch.search.bench import P_VALUES, ProblemScore, fast_p
from kernelsearch.store import DEFAULT_DB, Run, open_store, session_scope
from kernelsearch.store.database import StoreError
from kernelsearch.store.models import utcnow
from kernelsearch.store.queries import get_evaluation, kernel_count, run_stats

_NUMBER = re.compile(r"^(\d+)_")   # KernelBench names its files `N_Name.py`
PENDING = "pending"    # a problem of the batch not searched yet: a run row with no kernel
REFUSED = "refused"    # a problem that cannot be searched; stop_reason says why


class BenchError(Exception):
    """The batch cannot be run as asked; the message says why in one line."""


@dataclass
class Row:
    problem: str                          # the file's stem
    run: str                              # the run's name
    status: str
    best: Optional[float] = None          # the fastest correct kernel's speedup over eager: the run's reference
    #                                       figure over its own time (store/clock.py)
    best_compile: Optional[float] = None  # that kernel's speedup over torch.compile, where measured
    correct: bool = False
    evaluations: int = 0
    unjudged: int = 0                     # of them, harness_error: the judge could not evaluate the kernel
    tokens: int = 0
    cost_usd: float = 0.0
    allowed: list[str] = field(default_factory=list)   # the run's evaluation.allow_torch
    torch_ops: Optional[str] = None       # the allowed torch operations the best kernel calls ("" none)
    refused: Optional[str] = None         # why the problem could not be searched (status `refused`)


def problem_files(paths: list[str], problems: Optional[str] = None) -> list[Path]:
    """The batch's problem files, in order: a folder gives its *.py files sorted by KernelBench number, then
    name; a glob its matches; a file itself. `problems` ("1-20", "3,5-7") keeps the files of those numbers."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(p.glob("*.py"), key=_order)
            if not found:
                raise BenchError(f"{raw}: a folder with no .py problem files")
        elif p.is_file():
            found = [p]
        elif any(c in raw for c in "*?["):
            found = sorted((Path(m) for m in glob.glob(raw) if Path(m).is_file()), key=_order)
            if not found:
                raise BenchError(f"{raw}: no file matches this pattern")
        else:
            raise BenchError(f"{raw}: no such file or folder")
        files += [f.resolve() for f in found]
    files = list(dict.fromkeys(files))
    stems = [f.stem for f in files]
    twice = sorted({s for s in stems if stems.count(s) > 1})
    if twice:
        raise BenchError(f"two problem files named {twice[0]}.py: runs are named by file stem, so each must differ")
    if problems is not None:
        wanted = _ranges(problems)
        unnumbered = [f.name for f in files if not _NUMBER.match(f.name)]
        if unnumbered:
            raise BenchError(f"--problems {problems}: {unnumbered[0]} has no number (KernelBench names its files "
                             "N_Name.py)")
        files = [f for f in files if int(_NUMBER.match(f.name).group(1)) in wanted]
        if not files:
            raise BenchError(f"--problems {problems}: no problem file has one of these numbers")
    return files


def _order(p: Path) -> tuple:
    m = _NUMBER.match(p.name)
    return (0, int(m.group(1)), p.name) if m else (1, 0, p.name)


def _ranges(text: str) -> set[int]:
    """ "1-20" or "3,5-7" -> the numbers; anything else is a BenchError naming the piece."""
    out: set[int] = set()
    for piece in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", piece)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise BenchError(f"--problems {text}: {piece.strip()!r} is not a number or a range such as 1-20")
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return out


def read_config(path: Path) -> dict:
    """The batch's config as raw keys: the provider, search settings and budgets every problem gets. Its
    `problem:` and a `starter:` file are refused (bench gives each run its problem, and starts from the
    reference); its `name:` is the batch's name unless --name is given."""
    if not path.is_file():
        raise BenchError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise BenchError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise BenchError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    if "problem" in data:
        raise BenchError(f"{path}: problem: bench gives each run its problem from PATH; remove this key")
    if data.get("starter") not in (None, "none"):
        raise BenchError(f"{path}: starter: one starter file cannot fit every problem of a batch; remove it "
                         "(each problem starts from its reference)")
    return data


def with_compile(raw: dict, no_compile: bool) -> dict:
    """The batch's raw config with torch.compile timed (evaluation.compare_compile) unless `no_compile` or the config
    says otherwise: KernelBench scores fast_p over torch.compile as well as eager."""
    ev = raw.get("evaluation")
    ev = dict(ev) if isinstance(ev, dict) else {} if ev is None else ev
    if isinstance(ev, dict):
        if no_compile:
            ev["compare_compile"] = False
        else:
            ev.setdefault("compare_compile", True)
        raw = {**raw, "evaluation": ev}
    return raw


def run_bench(paths: list[str], config: Path, db: Optional[Path], name: Optional[str], problems: Optional[str],
              console: Console, jobs: int = 1, no_compile: bool = False) -> list[Row]:
    """Search every problem not yet finished, one after another (`jobs` > 1: that many at once, sharing one pool of
    evaluators, so the search's concurrency and the GPU's one-timing-at-a-time lease hold across problems); then
    print the table and fast_p. torch.compile is timed beside eager unless `no_compile`."""
    if jobs < 1:
        raise BenchError(f"--jobs {jobs}: give 1 or more problems at once")
    files = problem_files(paths, problems)
    raw = with_compile(read_config(config), no_compile)
    batch = name or raw.get("name") or config.stem
    store = Path(db or raw.get("store") or DEFAULT_DB)
    configs = {}
    for f in files:   # every problem's config before any search: a config error stops the batch before it starts
        try:
            configs[f] = parse_config({**raw, "problem": str(f), "name": f"{batch}-{f.stem}"}, source=str(config),
                                      base_dir=config.parent)
        except ConfigError as err:
            raise BenchError(f"{err} (for {f.name})") from None
    how = "one after another" if jobs == 1 else f"{jobs} at once on one pool of evaluators"
    console.print(f"batch {batch}: {len(files)} problems into {store}, {how}", markup=False)
    timed = next(iter(configs.values())).evaluation.compare_compile
    console.print("torch.compile: " + ("timed beside eager on a GPU (--no-compile skips it)" if timed else
                                       "not timed (fast_p over torch.compile will read 0)"), markup=False)
    enrol(store, batch, files, configs)
    if jobs > 1:
        asyncio.run(_at_once(files, configs, batch, store, jobs, console))
        rows = table(store, batch, files)
        print_table(rows, console)
        return rows
    for i, f in enumerate(files, 1):
        run_name = f"{batch}-{f.stem}"
        status = _unplaced(store, run_name)
        head = f"[{i}/{len(files)}] {f.stem} (run {run_name})"
        if not announce(console, head, status, "not searched again"):
            continue
        try:
            start_or_resume(configs[f], store, run_name, status, console)
        except (ConfigError, RunError) as err:   # this problem's; the batch goes on
            console.print(f"{head}: not searched: {err}", markup=False)
            refuse(store, run_name, configs[f], str(err))
    rows = table(store, batch, files)
    print_table(rows, console)
    return rows


async def _at_once(files: list[Path], configs: dict, batch: str, store: Path, jobs: int, console: Console) -> None:
    """`jobs` problems searched at a time in this event loop, every controller on one pool (built from the first
    problem's config: the batch's configs differ only in problem and name). A problem's error is its row's; a
    finished problem is not searched again, an interrupted one resumed."""
    from kernelsearch.runner import drive_shared, pool_for, prepare_resume, prepare_run

    pool = pool_for(configs[files[0]])
    gate = asyncio.Semaphore(jobs)

    async def one(i: int, f: Path) -> None:
        run_name = f"{batch}-{f.stem}"
        head = f"[{i}/{len(files)}] {f.stem} (run {run_name})"
        async with gate:
            status = _unplaced(store, run_name)
            if not announce(console, head, status, "not searched again"):
                return
            try:
                if status is None:
                    engine, run_id, _, _ = prepare_run(configs[f], store, run_name, console, pool=pool)
                    cfg = configs[f]
                else:
                    cfg, engine, run_id = prepare_resume(run_name, store, console)
                reason = await drive_shared(cfg, engine, run_id, pool, console, run_name)
                console.print(f"{head}: {reason}", markup=False)
            except (ConfigError, RunError) as err:   # this problem's; the batch goes on
                console.print(f"{head}: not searched: {err}", markup=False)
                refuse(store, run_name, configs[f], str(err))

    try:
        await asyncio.gather(*(one(i, f) for i, f in enumerate(files, 1)))
    finally:
        pool.close()


def enrol(store: Path, batch: str, files: list[Path], configs: dict) -> None:
    """Every problem of the batch a row of the store before any is searched: a `pending` run (no kernel) for each
    that has no run yet, so an interrupted batch is still counted over all its problems."""
    engine = _writable(store)
    try:
        with session_scope(engine) as s:
            have = set(s.exec(select(Run.name).where(Run.name.in_([f"{batch}-{f.stem}" for f in files]))).all())
            for f in files:
                if f"{batch}-{f.stem}" not in have:
                    s.add(Run(name=f"{batch}-{f.stem}", problem=configs[f].problem,
                              config_json=configs[f].model_dump_json(), status=PENDING))
    finally:
        engine.dispose()


def _unplaced(store: Path, name: str) -> Optional[str]:
    """The run's status as start_or_resume reads it: a `pending` or `refused` row (no kernel) is dropped, so the
    problem starts afresh (None); any other status is the run's own."""
    status = run_status(store, name, BenchError)
    if status not in (PENDING, REFUSED):
        return status
    engine = _writable(store)
    try:
        with session_scope(engine) as s:
            run = s.exec(select(Run).where(Run.name == name)).first()
            if run is not None and run.status in (PENDING, REFUSED) and kernel_count(s, run.id) == 0:
                s.delete(run)
                return None
            return run.status if run is not None else None
    finally:
        engine.dispose()


def refuse(store: Path, name: str, cfg, reason: str) -> None:
    """A problem that could not be searched, as a `refused` run whose stop_reason is `reason` (one line); nothing
    is written where the run already has a row (an error in a started run is that run's)."""
    engine = _writable(store)
    try:
        with session_scope(engine) as s:
            if s.exec(select(Run).where(Run.name == name)).first() is None:
                s.add(Run(name=name, problem=cfg.problem, config_json=cfg.model_dump_json(), status=REFUSED,
                          stop_reason=" ".join(reason.split())[:2000], finished_at=utcnow()))
    finally:
        engine.dispose()


def _writable(store: Path):
    try:
        return open_store(store)
    except StoreError as err:
        raise BenchError(str(err)) from None


def table(store: Path, batch: str, files: list[Path]) -> list[Row]:
    """One row per problem of the batch, read from the store (a problem with no run is `not started`)."""
    rows: list[Row] = []
    engine = open_read_only(store, BenchError) if store.exists() else None
    for f in files:
        row = Row(problem=f.stem, run=f"{batch}-{f.stem}", status="not started")
        if engine is not None:
            with session_scope(engine) as s:
                run = s.exec(select(Run).where(Run.name == row.run)).first()
                if run is not None:
                    row = row_of(s, run)
        rows.append(row)
    if engine is not None:
        engine.dispose()
    return rows


def row_of(session, run: Run) -> Row:
    """A run of a batch as its table row (problem: the problem file's stem)."""
    st = run_stats(session, run.id)
    if run.status == REFUSED:
        return Row(problem=Path(run.problem).stem, run=run.name, status=REFUSED, refused=run.stop_reason or "",
                   allowed=_allowance(run.config_json))
    row = Row(problem=Path(run.problem).stem, run=run.name,
              status=f"{run.status} ({run.stop_reason})" if run.stop_reason else run.status)
    row.correct = st.correct > 0
    row.best, row.best_compile = st.best_speedup, st.best_speedup_compile
    row.evaluations, row.tokens, row.cost_usd = st.evaluations, st.tokens, st.cost_usd
    row.unjudged = st.by_status.get("harness_error", 0)
    row.allowed = _allowance(run.config_json)
    if st.best_kernel_id is not None:
        ev = get_evaluation(session, st.best_kernel_id)   # its verdict (a re-timing scans the same code)
        row.torch_ops = ev.torch_ops if ev is not None else None
    return row


def batch_runs(session, batch: str) -> list[Run]:
    """The runs of a batch in a store: bench names each `<batch>-<its problem file's stem>`, so a run belongs to
    `batch` exactly when its name is that (a batch `kb1` does not take the runs of a batch `kb1-x`). In KernelBench
    order."""
    runs = session.exec(select(Run).where(Run.name.startswith(f"{batch}-", autoescape=True))).all()
    mine = [r for r in runs if r.name == f"{batch}-{Path(r.problem).stem}"]
    return sorted(mine, key=lambda r: _order(Path(r.problem)))


def batch_names(session) -> list[str]:
    """Every batch in a store (the names of runs made by bench, less their problem's stem)."""
    out = []
    for name, problem in session.exec(select(Run.name, Run.problem)).all():
        stem = f"-{Path(problem).stem}"
        if problem.endswith(".py") and name.endswith(stem) and len(name) > len(stem):
            out.append(name[: -len(stem)])
    return sorted(set(out))


def _allowance(config_json: str) -> list[str]:
    try:
        ops = json.loads(config_json or "{}").get("evaluation", {}).get("allow_torch") or []
    except (ValueError, AttributeError):
        return []
    return [str(o) for o in ops] if isinstance(ops, list) else []


def allowance_line(rows: list[Row]) -> str:
    """What the batch's kernels were allowed to leave to torch, and what the best ones did: printed beside fast_p,
    so a score with library calls is never taken for one without."""
    kinds = {tuple(r.allowed) for r in rows if r.status != "not started"}
    if not kinds or kinds == {()}:
        return "allow_torch: none (strict: every kernel does all its work in its own kernels)"
    if len(kinds) > 1:
        head = "allow_torch differs between problems: " + "; ".join(
            f"{r.problem} {', '.join(r.allowed) or 'none'}" for r in rows if r.status != "not started")
    else:
        head = f"allow_torch: {', '.join(next(iter(kinds)))}"
    calls = [r for r in rows if r.correct and r.torch_ops]
    ops = sorted({op for r in calls for op in r.torch_ops.split(",")})
    return (f"{head}; the best kernels of {len(calls)} of {len(rows)} problems call torch for part of the work"
            + (f" ({', '.join(ops)})" if ops else ""))


def correct_cell(r: Row) -> str:
    """yes, no, or `unjudged`: every evaluation of the problem was a harness_error (the judge could not evaluate
    any kernel), so nothing is known of its kernels; fast_p counts it as not correct (no correct kernel was
    found), and `unjudged_line` says so under the score."""
    if r.correct:
        return "yes"
    return "unjudged" if r.evaluations and r.unjudged == r.evaluations else "no"


def unjudged_line(rows: list[Row]) -> Optional[str]:
    """The problems whose evaluations were all harness_error, named under fast_p; None if there are none."""
    gone = [r.problem for r in rows if correct_cell(r) == "unjudged"]
    if not gone:
        return None
    return (f"{len(gone)} of {len(rows)} problems not judged (every evaluation a harness_error: the judge's own "
            f"failure, e.g. out of memory), counted as not correct in fast_p: {', '.join(gone)}; `kernelsearch "
            "resume` of their runs judges them again")


def refused_lines(rows: list[Row]) -> list[str]:
    """The refused problems, one line each with the reason, and a count: they are in fast_p's denominator."""
    gone = [r for r in rows if r.status == REFUSED]
    if not gone:
        return []
    return ([f"{len(gone)} of {len(rows)} problems refused (no kernel searched; counted as not correct in fast_p):"]
            + [f"  {r.problem}: {r.refused}" for r in gone])


def _x(v: Optional[float]) -> str:
    return f"{v:.3g}x" if v is not None else "-"


def print_table(rows: list[Row], console: Console) -> None:
    w = max(7, *(len(r.problem) for r in rows))
    ws = max(6, *(len(r.status) for r in rows))
    say = lambda line: console.print(line, markup=False, soft_wrap=True)   # noqa: E731 - one table, never wrapped
    say(f"{'problem':<{w}}  {'status':<{ws}} {'correct':<8} {'eager':>8} {'compile':>8} {'evals':>5} {'tokens':>8} "
        f"{'cost':>9}  torch")
    for r in rows:
        say(f"{r.problem:<{w}}  {r.status:<{ws}} {correct_cell(r):<8} {_x(r.best):>8} "
            f"{_x(r.best_compile):>8} {r.evaluations:>5} {r.tokens:>8} {'$' + format(r.cost_usd, '.4f'):>9}  "
            f"{(r.torch_ops or '-') if r.correct else '-'}")
    say(allowance_line(rows))
    eager = [ProblemScore(r.correct, r.best) for r in rows]
    say(f"fast_p over eager ({len(rows)} problems): "
        + ", ".join(f"fast_{p:g} {fast_p(eager, p):.3f}" for p in P_VALUES))
    if unjudged_line(rows):
        say(unjudged_line(rows))
    measured = sum(1 for r in rows if r.correct and r.best_compile is not None)
    if measured:
        comp = [ProblemScore(r.correct, r.best_compile) for r in rows]
        say(f"fast_p over torch.compile ({measured} of {len(rows)} problems measured; the others count as not "
            "faster): " + ", ".join(f"fast_{p:g} {fast_p(comp, p):.3f}" for p in P_VALUES if p > 0))
    for line in refused_lines(rows):
        say(line)
