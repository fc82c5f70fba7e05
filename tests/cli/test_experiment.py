"""`kernelsearch experiment`: one problem under each strategy x budget x repeat into one store, resumable; the table
and the report's experiment page read from the store. The runs go through runner.py's start and resume with the
in-process pool of tests/search/fakes.py (the sandbox's evaluations are tested elsewhere)."""
from __future__ import annotations

import io
import sqlite3

import pytest
import yaml
from rich.console import Console

from kernelsearch import runner
from kernelsearch.experiment import (
    ExperimentError,
    cells_of,
    experiment_runs,
    parse_budgets,
    parse_strategies,
    print_table,
    run_experiment,
    table,
)
from kernelsearch.store import Evaluation, Run, open_store, session_scope
from kernelsearch.store import queries as q
from kernelsearch.views.experiment import build_experiment_report
from tests.helpers import cli
from tests.search.fakes import FakePool, Killed


def _config(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "problem": "softmax", "store": str(tmp_path / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
        "search": {"ideas_per_round": 2, "branches_per_idea": 2, "seeds_per_round": 2, "seed": 5, "timings": 1},
        "evaluation": {"timeout_s": 60, "trials": 1}}))
    return path


def _evals(db) -> dict[str, list]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT r.name, e.id, e.kernel_id, e.status, e.speedup FROM run r JOIN kernel k ON "
                           "k.run_id = r.id JOIN evaluation e ON e.kernel_id = k.id ORDER BY e.id").fetchall()
    finally:
        con.close()
    out: dict[str, list] = {}
    for name, *rest in rows:
        out.setdefault(name, []).append(tuple(rest))
    return out


def test_experiment_killed_then_rerun_skips_finished_runs_and_resumes_the_killed_one(tmp_path, monkeypatch):
    made = []

    def pool(cfg):   # the third run's pool dies after 2 evaluations, as a killed process would
        made.append(FakePool(kill_after=2 if len(made) == 2 else None))
        return made[-1]

    monkeypatch.setattr(runner, "pool_for", pool)
    cfg, db = _config(tmp_path), tmp_path / "ks.db"
    args = (cfg, ["branching", "sequential"], [4, 6], 2, None, "e")
    with pytest.raises(Killed):
        run_experiment(*args, Console(file=io.StringIO()))
    first = _evals(db)
    assert {n: len(v) for n, v in first.items()} == {"e-branching-b4-r0": 4, "e-sequential-b4-r0": 4,
                                                   "e-branching-b6-r0": 2}
    out = io.StringIO()
    cells = run_experiment(*args, Console(file=out, width=200))
    after = _evals(db)
    text = out.getvalue()
    assert text.count("finished, not run again") == 2 and "e-branching-b6-r0: resuming (running)" in text
    for n in first:   # nothing lost, nothing redone
        assert after[n][: len(first[n])] == first[n]
    assert {n: len(v) for n, v in after.items()} == {
        f"e-{s}-b{b}-r{r}": b for s in ("branching", "sequential") for b in (4, 6) for r in (0, 1)}   # exact budgets
    con = sqlite3.connect(db)
    seeds = dict(con.execute("SELECT name, json_extract(config_json, '$.search.seed') FROM run").fetchall())
    strategies = dict(con.execute("SELECT name, json_extract(config_json, '$.search.strategy') FROM run").fetchall())
    con.close()
    assert seeds["e-sequential-b6-r0"] == 5 and seeds["e-sequential-b6-r1"] == 6     # repeat r: seed + r
    assert strategies["e-sequential-b4-r1"] == "sequential"
    assert [(c.strategy, c.budget, c.runs) for c in cells] == [("branching", 4, 2), ("branching", 6, 2),
                                                               ("sequential", 4, 2), ("sequential", 6, 2)]
    # a third time: nothing is run, the same table is printed
    out2 = io.StringIO()
    run_experiment(*args, Console(file=out2, width=200))
    assert out2.getvalue().count("finished, not run again") == 8
    assert out2.getvalue().split("runs into")[-1].splitlines()[-6:] == text.splitlines()[-6:]
    # the report's experiment page: a line per strategy, the table
    engine = open_store(db, readonly=True)
    with session_scope(engine) as s:
        page = build_experiment_report(s, "e")
    assert page.count("<polyline") == 2 and "sequential" in page and "best speedup vs evaluations" in page


def _hand_made(db, runs: dict[str, tuple[str, list]]):
    """Runs with their evaluations' speedups in order (None: a failed evaluation)."""
    engine = open_store(db)
    with session_scope(engine) as s:
        for name, (status, speedups) in runs.items():
            run = Run(name=name, problem="softmax", config_json="{}", status=status)
            s.add(run)
            s.flush()
            for i, sp in enumerate(speedups):
                kid = q.add_kernel(s, run.id, code=f"# {name} {i}", code_hash=f"{name}{i}", language="triton")
                q.add_evaluation(s, Evaluation(kernel_id=kid, status="ok" if sp is not None else "incorrect",
                                               speedup=sp, time_ms=1 / sp if sp else None,
                                               ref_time_ms=1.0 if sp else None))   # one reference figure: 1 ms
                s.flush()
    engine.dispose()


def test_the_table_is_computed_from_the_store(tmp_path):
    db = tmp_path / "ks.db"
    _hand_made(db, {
        "x-branching-b4-r0": ("finished", [1.0, 1.5, None, 2.0]),
        "x-branching-b4-r1": ("finished", [1.0, None, None, 1.2]),
        "x-branching-b4-r2": ("finished", [1.0, 3.0, 1.1, 0.9]),
        "x-sequential-b2-r0": ("finished", [None, None]),
        "x-sequential-b2-r1": ("finished", [1.0, 1.1]),
        "x-sequential-b4-r0": ("running", [1.0, 9.0]),           # not finished: not counted
        "x-sequential-b4-r1": ("finished", [1.0, 1.4, 1.3]),      # stopped short of its budget
        "other-branching-b4-r0": ("finished", [50.0]),            # another experiment
    })
    cells = {(c.strategy, c.budget): c for c in table(db, "x", ["branching", "sequential"], [2, 4], 3)}
    b4, b2 = cells[("branching", 4)], cells[("branching", 2)]
    assert (b4.runs, b4.found, b4.median, b4.spread) == (3, 3, 2.0, (1.2, 3.0))
    assert b4.correct_fraction == 9 / 12
    # budget 2 has no runs of its own: each repeat's budget-4 run is read at its first 2 evaluations
    assert (b2.runs, b2.median, b2.spread, b2.correct_fraction) == (3, 1.5, (1.0, 3.0), 5 / 6)
    s2, s4 = cells[("sequential", 2)], cells[("sequential", 4)]
    assert (s2.runs, s2.found, s2.bests) == (2, 1, [1.1])
    assert (s4.runs, s4.short, s4.bests) == (1, 1, [1.4])
    out = io.StringIO()
    print_table(list(cells.values()), Console(file=out, width=200))
    line = next(ln for ln in out.getvalue().splitlines() if ln.split()[:2] == ["branching", "4"])
    assert line.split() == ["branching", "4", "3", "2x", "1.2x-3x", "75%", "0"]
    engine = open_store(db, readonly=True)
    with session_scope(engine) as s:
        assert {c.name for c in experiment_runs(s, "x")} == {n for n in (
            "x-branching-b4-r0", "x-branching-b4-r1", "x-branching-b4-r2", "x-sequential-b2-r0", "x-sequential-b2-r1",
            "x-sequential-b4-r0", "x-sequential-b4-r1")}
        assert cells_of(experiment_runs(s, "none"), ["branching"], [4], 1)[0].runs == 0


def test_bad_arguments_are_one_line(tmp_path):
    with pytest.raises(ExperimentError, match="'greedy' is not a strategy"):
        parse_strategies("branching,greedy")
    with pytest.raises(ExperimentError, match="'0' is not a positive"):
        parse_budgets("16,0")
    assert parse_budgets("32, 16,32") == [16, 32]
    r = cli("experiment", str(_config(tmp_path)), "--strategies", "sequential,nope", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --strategies: 'nope' is not a strategy; the strategies are branching, sequential, best_of_n, "
        "evolutionary"]


def test_unjudged_evaluations_are_left_out_of_the_correct_fraction():
    from kernelsearch.experiment import RunCurve

    run = RunCurve("branching", 4, 0, "x-branching-b4-r0", "finished", "rounds_done", "softmax",
                   [True, None, False, None], [1.0, 1.0, 1.0, 1.0])
    cell = cells_of([run], ["branching"], [4], 1)[0]
    assert (cell.evaluations, cell.unjudged, cell.correct, cell.correct_fraction, cell.short) == (2, 2, 1, 0.5, 0)
