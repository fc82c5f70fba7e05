"""`kernelsearch experiment`: one problem searched under several strategies at equal evaluation budgets, repeated,
into one store; a table of best speedup per strategy and budget, computed from the store.

Each (strategy, budget, repeat) is one run named `<experiment>-<strategy>-b<budget>-r<repeat>`, made from the
config with `search.strategy` set, `budgets.evaluations` set to the budget, `search.seed` + repeat as its seed, and
rounds unlimited (the evaluation budget is what ends a run, or a stated reason: a target, another budget, a search
that stalls). Runs are started or resumed with runner.py's functions, one after another (each evaluates its kernels
concurrently); rerunning the same command skips finished runs and resumes interrupted ones, as `bench` does.

`--nested` runs each strategy and repeat once, at the largest budget, and reads a smaller budget B from the first B
evaluations of that run (no strategy plans by its budget, so this is the run it would have made, but for the cut of
its last round); it costs the largest budget instead of their sum. The table reads, for each budget, the runs made
at that budget, else the shortest longer run's first B evaluations.

The table and the curves of best speedup against evaluations (the report's experiment page) are computed from the
store when they are shown: nothing of them is stored.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml
from rich.console import Console
from sqlmodel import Session

from kernelsearch.run_status import open_read_only, run_status
from kernelsearch.search.settings import STRATEGIES
from kernelsearch.store import DEFAULT_DB, session_scope
from kernelsearch.store import queries as q

UNLIMITED_ROUNDS = 100_000   # rounds never end an experiment's run: its evaluation budget does


class ExperimentError(Exception):
    """The experiment cannot be run as asked; the message says why in one line."""


def run_name(experiment: str, strategy: str, budget: int, repeat: int) -> str:
    return f"{experiment}-{strategy}-b{budget}-r{repeat}"


def parse_list(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ExperimentError(f"--{what}: give at least one, comma-separated")
    return list(dict.fromkeys(items))


def parse_strategies(text: str) -> list[str]:
    out = parse_list(text, "strategies")
    bad = [s for s in out if s not in STRATEGIES]
    if bad:
        raise ExperimentError(f"--strategies: {bad[0]!r} is not a strategy; the strategies are {', '.join(STRATEGIES)}")
    return out


def parse_budgets(text: str) -> list[int]:
    out = []
    for b in parse_list(text, "budgets"):
        if not b.isdigit() or int(b) < 1:
            raise ExperimentError(f"--budgets: {b!r} is not a positive whole number of evaluations")
        out.append(int(b))
    return sorted(set(out))


def read_config(path: Path) -> dict:
    if not path.is_file():
        raise ExperimentError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ExperimentError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return data


def run_config(raw: dict, strategy: str, budget: int, repeat: int, name: str) -> dict:
    """The config of one run of the experiment, as raw keys."""
    search = dict(raw.get("search") or {})
    search.update(strategy=strategy, seed=int(search.get("seed", 0)) + repeat, rounds=UNLIMITED_ROUNDS)
    budgets = {**(raw.get("budgets") or {}), "evaluations": budget}
    return {**raw, "search": search, "budgets": budgets, "name": name}


@dataclass(frozen=True)
class Planned:
    strategy: str
    budget: int
    repeat: int
    name: str


def plan(experiment: str, strategies: list[str], budgets: list[int], repeats: int, nested: bool) -> list[Planned]:
    """The runs to make, repeat by repeat (so a partial experiment has every strategy at the same repeats)."""
    made = [max(budgets)] if nested else budgets
    return [Planned(s, b, r, run_name(experiment, s, b, r))
            for r in range(repeats) for b in made for s in strategies]


def run_experiment(config: Path, strategies: list[str], budgets: list[int], repeats: int, db: Optional[Path],
                   name: Optional[str], console: Console, nested: bool = False) -> list["Cell"]:
    """Make every run not yet finished, one after another; then print the table."""
    from kernelsearch.config import ConfigError, parse_config
    from kernelsearch.runner import RunError, announce, start_or_resume

    if repeats < 1:
        raise ExperimentError(f"--repeats {repeats}: give at least 1")
    raw = read_config(config)
    experiment = name or raw.get("name") or config.stem
    store = Path(db or raw.get("store") or DEFAULT_DB)
    runs = plan(experiment, strategies, budgets, repeats, nested)
    configs = {}
    for p in runs:   # every run's config before any search: a config error stops the experiment before it starts
        try:
            configs[p.name] = parse_config(run_config(raw, p.strategy, p.budget, p.repeat, p.name),
                                           source=str(config), base_dir=config.parent)
        except ConfigError as err:
            raise ExperimentError(str(err)) from None
    console.print(f"experiment {experiment}: {len(runs)} runs ({', '.join(strategies)} x budgets "
                  f"{', '.join(map(str, budgets))}{' nested' if nested else ''} x {repeats} repeats) into {store}",
                  markup=False)
    for i, p in enumerate(runs, 1):
        status = run_status(store, p.name, ExperimentError)
        head = f"[{i}/{len(runs)}] {p.name}"
        if not announce(console, head, status, "not run again"):
            continue
        try:
            start_or_resume(configs[p.name], store, p.name, status, console)
        except (ConfigError, RunError) as err:   # this run's; the experiment goes on
            console.print(f"{head}: not run: {err}", markup=False)
    cells = table(store, experiment, strategies, budgets, repeats)
    print_table(cells, console)
    return cells


# -- reading the store -----------------------------------------------------------------------------------------------
@dataclass
class RunCurve:
    """One run of the experiment: its evaluations in the order they were written."""

    strategy: str
    budget: int
    repeat: int
    name: str
    status: str
    stop_reason: Optional[str]
    problem: str = ""
    ok: list[Optional[bool]] = field(default_factory=list)       # per evaluation: correct; None: not judged
    #                                                              (harness_error: the judge's own failure)
    best: list[Optional[float]] = field(default_factory=list)    # per evaluation: best speedup so far

    def best_within(self, n: int) -> Optional[float]:
        return self.best[min(n, len(self.best)) - 1] if self.best else None


_NAME = re.compile(r"^(?P<exp>.+)-(?P<strategy>" + "|".join(STRATEGIES) + r")-b(?P<budget>\d+)-r(?P<repeat>\d+)$")


def experiment_runs(session: Session, experiment: str) -> list[RunCurve]:
    """Every run of the experiment in the store, found by name, with its curve."""
    out = []
    for run in q.list_runs(session):
        m = _NAME.match(run.name)
        if not m or m.group("exp") != experiment:
            continue
        points = q.progress(session, run.id)
        out.append(RunCurve(m.group("strategy"), int(m.group("budget")), int(m.group("repeat")), run.name,
                            run.status, run.stop_reason, run.problem,
                            [None if p.status == "harness_error" else p.status == "ok" for p in points],
                            [p.best_so_far for p in points]))
    return out


@dataclass
class Cell:
    """One strategy at one budget, over its repeats."""

    strategy: str
    budget: int
    runs: int = 0                          # runs that count (finished, or read nested from a longer one)
    found: int = 0                         # of them, runs with a correct kernel within the budget
    bests: list[float] = field(default_factory=list)
    evaluations: int = 0                   # evaluations judged, over the runs (harness_error left out)
    correct: int = 0                       # of them, correct
    unjudged: int = 0                      # evaluations the judge could not complete (harness_error)
    short: int = 0                         # runs that stopped before the budget (stated reason: see `runs`)

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.bests) if self.bests else None

    @property
    def spread(self) -> tuple[Optional[float], Optional[float]]:
        return (min(self.bests), max(self.bests)) if self.bests else (None, None)

    @property
    def correct_fraction(self) -> Optional[float]:
        return self.correct / self.evaluations if self.evaluations else None


def cells_of(curves: list[RunCurve], strategies: list[str], budgets: list[int], repeats: int) -> list[Cell]:
    """The table: for each strategy and budget B, each repeat's run made at B, or else the shortest run made at a
    larger budget, read at its first B evaluations. Unfinished runs are left out."""
    by = {(c.strategy, c.budget, c.repeat): c for c in curves if c.status == "finished"}
    made = sorted({c.budget for c in curves})
    out = []
    for s in strategies:
        for b in budgets:
            cell = Cell(s, b)
            for r in range(repeats):
                run = by.get((s, b, r)) or next((by[(s, m, r)] for m in made if m > b and (s, m, r) in by), None)
                if run is None:
                    continue
                n = min(b, len(run.ok))
                cell.runs += 1
                judged = [ok for ok in run.ok[:n] if ok is not None]
                cell.evaluations += len(judged)
                cell.unjudged += n - len(judged)
                cell.correct += sum(judged)
                cell.short += n < b
                best = run.best_within(b)
                if best is not None:
                    cell.found += 1
                    cell.bests.append(best)
            out.append(cell)
    return out


def table(store: Path, experiment: str, strategies: list[str], budgets: list[int], repeats: int) -> list[Cell]:
    if not store.exists():
        return cells_of([], strategies, budgets, repeats)
    engine = open_read_only(store, ExperimentError)
    try:
        with session_scope(engine) as s:
            curves = experiment_runs(s, experiment)
    finally:
        engine.dispose()
    return cells_of(curves, strategies, budgets, repeats)


def _x(v: Optional[float]) -> str:
    return f"{v:.3g}x" if v is not None else "-"


def print_table(cells: list[Cell], console: Console) -> None:
    say = lambda line: console.print(line, markup=False, soft_wrap=True)   # noqa: E731 - one table, never wrapped
    w = max(8, *(len(c.strategy) for c in cells))
    say(f"{'strategy':<{w}} {'budget':>6} {'runs':>5} {'median':>8} {'min-max':>15} {'correct':>8} {'short':>5}")
    for c in cells:
        lo, hi = c.spread
        frac = f"{c.correct_fraction:.0%}" if c.correct_fraction is not None else "-"
        spread = f"{_x(lo)}-{_x(hi)}" if lo is not None else "-"
        runs = f"{c.found}/{c.runs}" if c.found != c.runs else str(c.runs)
        say(f"{c.strategy:<{w}} {c.budget:>6} {runs:>5} {_x(c.median):>8} {spread:>15} {frac:>8} {c.short:>5}")
    say("best speedup over eager within the budget (median and min-max over repeats); correct: the fraction of the "
        "evaluations that were correct; short: runs that stopped before the budget (see `kernelsearch runs`)")
