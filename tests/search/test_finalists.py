"""A clock to steer by (issue 30, the CPU side): one reference figure per run and device, kernels ranked by their
own time, finalists re-timed. The controller, the offline provider and a real SQLite store are real; the pools are
fakes.py's, with timings that move the way real ones do: the reference reads differently in every evaluation, and a
kernel's first timing can be lucky."""
from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import statistics

import pytest
from sqlmodel import Session, select

from kernelsearch.export.source import read_source
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.settings import GROUP_MAX
from kernelsearch.judge.status import Status
from kernelsearch.search import strategies
from kernelsearch.search.describe import describe_result
from kernelsearch.search.finalists import Retimer
from kernelsearch.search.seeds import Scored, pick_seeds
from kernelsearch.store import Evaluation, Kernel, Run, open_store, session_scope
from kernelsearch.store import queries as q
from tests.search.fakes import FakePool, Killed, config, drive, fake_result, new_run

REFS = (2.0, 0.4, 5.0, 1.1)   # the reference as successive evaluations read it: a 12x spread, as on the CPU


def _h(code: str) -> int:
    return int(hashlib.sha256(code.strip().encode()).hexdigest()[:8], 16)


class MovingPool(FakePool):
    """fakes.py's verdicts and true times, but every evaluation reads the reference differently (REFS in turn) and
    stores its own side-by-side ratio; with `lucky`, a code whose hash is even reads 0.3x its true time the first
    time it is evaluated, and its later timings scatter about the truth (1.1x, then 1x)."""

    def __init__(self, *, lucky: bool = False, kill_after: int | None = None):
        super().__init__(kill_after=kill_after)
        self.lucky = lucky
        self.calls: dict[str, int] = {}

    async def evaluate(self, code, ref, may_start=None, retime=False):
        result = await super().evaluate(code, ref, may_start, retime)
        if result is None or result.status != Status.ok:
            return result
        n = self.calls[code] = self.calls.get(code, 0) + 1
        truth = true_ms(code)
        factors = (0.3, 1.1, 1.0) if self.lucky and _h(code) % 2 == 0 else (1.0, 0.9, 1.2)
        result.time_ms = truth * factors[min(n, 3) - 1]
        result.ref_time_ms = REFS[len(self.codes) % len(REFS)]
        result.speedup = result.ref_time_ms / result.time_ms
        return result


def true_ms(code: str) -> float:
    return fake_result(code).time_ms


def _store_rows(db) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, kernel_id, status, time_ms, ref_time_ms, purpose FROM evaluation "
                           "ORDER BY id").fetchall()
    finally:
        con.close()


# -- one reference figure ----------------------------------------------------------------------------------------
def _kernels(db, n: int, timings: list[tuple[float, float]] = ()):
    """A store with one run of n kernels (code `# k0`, `# k1`, ...), the first ones evaluated ok at (time, ref)."""
    engine = open_store(db)
    with session_scope(engine) as s:
        run = Run(name=db.stem, problem="softmax", config_json="{}", device="cpu-interpreter")
        s.add(run)
        s.flush()
        ids = [q.add_kernel(s, run.id, code=f"# k{i}", code_hash=f"h{i}", language="triton") for i in range(n)]
        for kid, (t, ref) in zip(ids, timings):
            q.add_evaluation(s, Evaluation(kernel_id=kid, status="ok", stage="timing", time_ms=t, ref_time_ms=ref,
                                           speedup=ref / t, timing_kind="cpu-interpreter", device="cpu-interpreter"))
        rid = run.id
    return engine, rid, ids


def _hand_store(tmp_path):
    """k1 1.0 ms against a reference read at 2.0 (2.0x), k2 0.5 ms against 0.4 (0.8x), k3 2.0 ms against 5.0
    (2.5x): by its own ratio k3 is best and k2 worst; by time k2 is best and k3 worst."""
    return _kernels(tmp_path / "hand.db", 3, [(1.0, 2.0), (0.5, 0.4), (2.0, 5.0)])


def test_a_run_shows_every_speedup_over_one_reference_figure(tmp_path):
    engine, rid, (k1, k2, k3) = _hand_store(tmp_path)
    with Session(engine) as s:
        assert q.reference_ms(s, rid, "cpu-interpreter") == 2.0          # the median of 2.0, 0.4 and 5.0
        assert q.reference_ms(s, rid, "NVIDIA H100") is None
        t = q.tree(s, rid)
        assert {k: t.kernels[k].speedup for k in (k1, k2, k3)} == {k1: 2.0, k2: 4.0, k3: 1.0}
        assert {t.kernels[k].ref_time_ms for k in (k1, k2, k3)} == {2.0}
        assert t.kernels[k3].eval_speedup == 2.5                           # the evaluation's own ratio, kept
        assert [k.id for k in t.best(3)] == [k2, k1, k3]                  # by time, not by that ratio
        st = q.run_stats(s, rid)
        assert (st.best_kernel_id, st.best_speedup, st.reference_ms, st.reference_timings) == (k2, 4.0, 2.0, 3)
        assert [p.speedup for p in q.progress(s, rid)] == [2.0, 4.0, 1.0]
        assert [p.best_so_far for p in q.progress(s, rid)] == [2.0, 4.0, 4.0]
        assert [(r.best_speedup, r.best_so_far) for r in q.round_stats(s, rid)] == [(4.0, 4.0)]
        assert describe_result(t.kernels[k2]) == "0.5 ms (cpu-interpreter), 4.00x eager"   # as the LLM is shown it
        src = read_source(s, tmp_path / "hand.db", None, "hand", False)    # `export --run`: its best, on the figure
        assert src.kernel_id == k2 and src.evaluation["speedup"] == 4.0 and src.evaluation["ref_time_ms"] == 2.0
        assert src.evaluation["eval_speedup"] == 0.8
    engine.dispose()


def test_a_retiming_moves_the_kernels_time_to_its_median_and_the_figure_with_it(tmp_path):
    engine, rid, (k1, k2, k3) = _hand_store(tmp_path)
    with session_scope(engine) as s:   # k2's 0.5 ms was lucky: re-timed at 1.5 and 1.2 ms, it is 1.2 ms
        for t, ref in ((1.5, 3.0), (1.2, 3.0)):
            q.add_evaluation(s, Evaluation(kernel_id=k2, status="ok", time_ms=t, ref_time_ms=ref,
                                           device="cpu-interpreter", purpose=q.RETIME))
    with Session(engine) as s:
        k = q.tree(s, rid).kernels
        assert (k[k2].time_ms, k[k2].timings, k[k2].retimes, k[k2].eval_time_ms) == (1.2, 3, 2, 0.5)
        assert q.reference_ms(s, rid, "cpu-interpreter") == 3.0           # median of 0.4, 2.0, 3.0, 3.0, 5.0
        assert describe_result(k[k2]) == "1.2 ms (cpu-interpreter, median of 3 timings), 2.50x eager"
        assert [b.id for b in q.best_kernels(s, rid, 3)] == [k1, k2, k3]
        st = q.run_stats(s, rid)
        assert (st.evaluations, st.retimes, st.best_kernel_id, st.best_timings) == (3, 2, k1, 1)
    engine.dispose()


def test_a_kernel_a_retiming_found_wrong_is_not_ranked(tmp_path):
    engine, rid, (k1, k2, k3) = _hand_store(tmp_path)
    with session_scope(engine) as s:
        q.add_evaluation(s, Evaluation(kernel_id=k2, status="incorrect", reason="values off", purpose=q.RETIME))
        q.add_evaluation(s, Evaluation(kernel_id=k1, status="harness_error", reason="oom", purpose=q.RETIME))
    with Session(engine) as s:
        t = q.tree(s, rid)
        assert t.kernels[k2].state == "ok" and t.kernels[k2].retime_failed == "incorrect"
        assert [k.id for k in t.best(3)] == [k1, k3]   # the judge's own failure (harness_error) says nothing
    engine.dispose()


# -- ranking by time in a search ------------------------------------------------------------------------------------
def test_seeds_and_the_best_are_chosen_by_time_where_the_ratio_would_pick_others(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 16}, search={"timings": 1, "rounds": 4})
    engine, rid = new_run(cfg.store, "time", cfg)
    events: list = []
    drive(cfg, engine, rid, MovingPool(), events)
    with Session(engine) as s:
        t = q.tree(s, rid)
        st = q.run_stats(s, rid)
    ok = [k for k in t.kernels.values() if k.status == "ok"]
    fastest = min(ok, key=lambda k: (k.time_ms, k.id))   # without `lucky`, every timing of a code is its true time
    by_ratio = max(ok, key=lambda k: k.eval_speedup)
    assert by_ratio.id != fastest.id                       # the per-evaluation ratio would have reported another
    assert st.best_kernel_id == fastest.id and st.best_time_ms == fastest.time_ms
    assert st.best_speedup == st.reference_ms / fastest.time_ms
    assert len({k.ref_time_ms for k in ok}) == 1 and len({k.eval_ref_time_ms for k in ok}) > 1
    # what the live display showed as each verdict came: the run's figure as it stood then, over the kernel's time
    rows = _store_rows(cfg.store)
    for kind, d in events:
        if kind == "evaluated" and d["status"] == "ok":
            n = next(i for i, r in enumerate(rows) if r[1] == d["kernel_id"])
            figure = statistics.median(r[4] for r in rows[:n + 1] if r[4] is not None)
            assert d["speedup"] == figure / t.kernels[d["kernel_id"]].time_ms
    rounds = [d for kind, d in events if kind == "round"]
    assert rounds
    picked_other = False
    for d in rounds:   # each round's parents: what branching picks by time from the kernels of the rounds before
        before = [k for k in ok if k.round < d["round"]]
        want = [c.kernel_id for c in pick_seeds([Scored(k.id, k.idea_id, k.time_ms) for k in before],
                                                cfg.search.seeds_per_round)]
        assert d["seeds"] == want, d
        ratio = sorted(before, key=lambda k: (-k.eval_speedup, k.id))[0].id
        picked_other |= ratio != want[0]
    assert picked_other                                    # at least one round the ratio would have seeded another


# -- finalists re-timed -------------------------------------------------------------------------------------------
def test_finalists_are_retimed_and_a_kernels_time_is_the_median_of_its_rows(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 14}, search={"rounds": 4})
    engine, rid = new_run(cfg.store, "finalists", cfg)
    events: list = []
    pool = MovingPool(lucky=True)
    drive(cfg, engine, rid, pool, events)
    rows = _store_rows(cfg.store)
    with Session(engine) as s:
        t = q.tree(s, rid)
        st = q.run_stats(s, rid)
    verdicts = [r for r in rows if r[5] is None]
    retimes = [r for r in rows if r[5] == "retime"]
    assert len(t.kernels) == len(verdicts) == 14 and st.evaluations == 14   # re-timings are not kernels
    assert retimes and st.retimes == len(retimes) and len(pool.codes) == len(rows)
    assert len(pool.retimed) == len(retimes)   # each asked in the pool's re-timing mode, and nothing else
    assert any(kind == "retiming" for kind, _ in events) and any(kind == "retimed" for kind, _ in events)
    # asked round robin: in a re-timing pass of several kernels each is asked once before any a second time
    passes = [e for kind, e in events if kind == "retiming"]
    i = next(i for i, e in enumerate(passes) if len(e["kernels"]) >= 2 and e["n"] > len(e["kernels"]))
    start = sum(e["n"] for e in passes[:i])
    assert len(set(pool.retimed[start:start + len(passes[i]["kernels"])])) == len(passes[i]["kernels"])
    per_kernel: dict[int, list[float]] = {}
    for _, kid, status, time_ms, _, _ in rows:
        if status == "ok":
            per_kernel.setdefault(kid, []).append(time_ms)
    for kid, k in t.kernels.items():
        if k.status != "ok":
            continue
        assert k.time_ms == statistics.median(per_kernel[kid]) and k.timings == len(per_kernel[kid])
        assert k.retimes <= cfg.search.timings - 1
    # the finalists as the run ends, best first, each with all its timings
    finals = strategies.finalists(t, cfg.search.seeds_per_round + 1)
    assert all(t.kernels[kid].timings == cfg.search.timings for kid in finals)
    # the winner's curse undone: the run's best is the truly fastest kernel, not the one whose first timing was luckiest
    ok = [k for k in t.kernels.values() if k.status == "ok"]
    truly = min(ok, key=lambda k: (true_ms(_code(engine, k.id)), k.id))
    luckiest = min(ok, key=lambda k: (k.eval_time_ms, k.id))
    assert st.best_kernel_id == truly.id and luckiest.id != truly.id
    assert t.kernels[truly.id].time_ms == true_ms(_code(engine, truly.id))


def _code(engine, kid: int) -> str:
    with Session(engine) as s:
        return s.get(Kernel, kid).code


def test_a_resume_after_a_run_with_retimings_redoes_nothing(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 10}, search={"rounds": 3})
    engine, rid = new_run(cfg.store, "again", cfg)
    drive(cfg, engine, rid, MovingPool(lucky=True))
    before = _store_rows(cfg.store)
    assert any(r[5] == "retime" for r in before)
    with session_scope(engine) as s:   # as a kill after the last re-timing, before the run was marked finished
        run = s.get(Run, rid)
        stop = run.stop_reason
        run.status, run.stop_reason = "running", None
        s.add(run)
        assert q.queued_kernels(s, rid) == [] and q.unjudged_kernels(s, rid) == []
    pool = MovingPool(lucky=True)
    drive(cfg, engine, rid, pool)
    assert pool.codes == [] and _store_rows(cfg.store) == before
    with session_scope(engine) as s:
        run = s.get(Run, rid)
        assert (run.status, run.stop_reason) == ("finished", stop)


def test_a_run_killed_while_retiming_resumes_without_redoing_a_kernel(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 10}, search={"rounds": 3})
    clean_engine, clean_id = new_run(tmp_path / "clean.db", "r", cfg)
    clean = MovingPool(lucky=True)
    drive(cfg, clean_engine, clean_id, clean)
    first_retime = next(n for n, r in enumerate(_store_rows(tmp_path / "clean.db")) if r[5] == "retime")
    engine, rid = new_run(cfg.store, "r", cfg)
    try:   # killed as its first re-timing would be stored
        drive(cfg, engine, rid, MovingPool(lucky=True, kill_after=first_retime))
    except Killed:
        pass
    before = _store_rows(cfg.store)
    assert len(before) == first_retime and all(r[5] is None for r in before)
    drive(cfg, engine, rid, MovingPool(lucky=True))
    after = _store_rows(cfg.store)
    assert after[:len(before)] == before
    verdicts = [r[1] for r in after if r[5] is None]
    assert len(verdicts) == len(set(verdicts)) == 10
    with Session(engine) as s:
        assert all(k.retimes <= cfg.search.timings - 1 for k in q.tree(s, rid).kernels.values())
        assert s.get(Run, rid).status == "finished"


def test_retimings_stop_at_the_wall_time_budget(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 4}, search={"rounds": 1, "timings": 1})
    engine, rid = new_run(cfg.store, "wall", cfg)
    drive(cfg, engine, rid, MovingPool())
    rows = _store_rows(cfg.store)
    pool = MovingPool()
    retime = Retimer(engine, rid, pool, "softmax", timings=3, finalists=3, emit=lambda *_: None,
                     may_start=lambda: False, stored=lambda: None)
    assert retime.due()                                    # finalists short of their timings...
    assert asyncio.run(retime("finish")) == 0              # ...but none starts past the wall time
    assert pool.codes == [] and _store_rows(cfg.store) == rows


class GroupPool(MovingPool):
    """MovingPool with the local pool's side-by-side re-timing: each group asked is recorded, each code in it read
    as MovingPool reads a re-timing."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.groups: list[list[str]] = []

    async def retime_group(self, codes, ref, may_start=None):
        self.groups.append(list(codes))
        return [await self.evaluate(c, ref, may_start, retime=True) for c in codes]


def test_a_pool_that_times_side_by_side_gets_each_pass_as_groups_of_distinct_finalists(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 14}, search={"rounds": 4, "seeds_per_round": 5, "timings": 3})
    engine, rid = new_run(cfg.store, "groups", cfg)
    events: list = []
    pool = GroupPool(lucky=True)
    drive(cfg, engine, rid, pool, events)
    rows = _store_rows(cfg.store)
    retimes = [r for r in rows if r[5] == "retime"]
    assert pool.groups and sum(map(len, pool.groups)) == len(pool.retimed) == len(retimes)
    # each pass re-times every finalist due once: the pass's finalists are its groups, split at GROUP_MAX
    passes = [len(e["kernels"]) for kind, e in events if kind == "retiming"]
    sizes = [min(GROUP_MAX, n - j) for n in passes for j in range(0, n, GROUP_MAX)]
    assert [len(g) for g in pool.groups] == sizes
    assert max(map(len, pool.groups)) >= 2 and all(len(g) == len(set(g)) for g in pool.groups)
    with Session(engine) as s:
        t = q.tree(s, rid)
        st = q.run_stats(s, rid)
    ok = [k for k in t.kernels.values() if k.status == "ok"]
    truly = min(ok, key=lambda k: (true_ms(_code(engine, k.id)), k.id))
    assert st.best_kernel_id == truly.id and t.kernels[truly.id].timings == cfg.search.timings


def test_more_finalists_than_a_group_holds_are_split_and_each_row_is_its_kernels(tmp_path):
    engine, rid, kids = _kernels(tmp_path / "split.db", 6)
    pool = GroupPool()
    retimer = Retimer(engine, rid, pool, "softmax", timings=3, finalists=6, emit=lambda *a: None,
                      may_start=lambda: True, stored=lambda: None)
    dues = [[(k, 2) for k in kids], [(k, 1) for k in kids], []]
    retimer.due = lambda: dues.pop(0)
    assert asyncio.run(retimer("test")) == 12
    # 6 finalists, 2 re-timings each, one a pass: a group of GROUP_MAX and one of the rest, then again
    names = [[c.split()[-1] for c in g] for g in pool.groups]
    assert [len(g) for g in names] == [GROUP_MAX, 6 - GROUP_MAX] * 2
    assert names[0] + names[1] == names[2] + names[3] == [f"k{i}" for i in range(6)]
    with Session(engine) as s:
        stored = [(e.kernel_id, e.purpose) for e in s.exec(select(Evaluation)).all()]
    assert sorted(stored) == sorted((k, "retime") for k in kids for _ in range(2))


class SteadyPool:
    """A pool whose clock reads each kernel at its time in `times` (its stored evaluation's), its first re-timing
    `wobble` slower and its second at the time again."""

    def __init__(self, times: dict[str, float], wobble: float):
        self.times, self.wobble, self.n = times, wobble, {}

    async def evaluate(self, code, ref, may_start=None, retime=False):
        self.n[code] = self.n.get(code, 0) + 1
        t = self.times[code] * (1 + self.wobble * (self.n[code] % 2))
        return EvalResult(status=Status.ok, stage="timing", time_ms=t, ref_time_ms=2.0, speedup=2.0 / t,
                          timing_kind="cpu-interpreter", device="cpu-interpreter")


@pytest.mark.parametrize("wobble,agree,each", [
    (0.0, 0.01, 1),     # the re-timing agrees with the evaluation: a third timing would not move the median
    (0.005, 0.01, 1),   # within 1 %
    (0.05, 0.01, 2),    # 5 % apart: re-timed up to `timings`
    (0.0, 0.0, 2),      # agreement not asked for: always `timings`
])
def test_a_finalist_whose_timings_agree_is_re_timed_no_more(tmp_path, wobble, agree, each):
    engine, rid, kids = _kernels(tmp_path / "agree.db", 2, [(1.0, 2.0), (2.0, 2.0)])
    pool = SteadyPool({"# k0": 1.0, "# k1": 2.0}, wobble)
    retimer = Retimer(engine, rid, pool, "softmax", timings=3, finalists=2, emit=lambda *a: None,
                      may_start=lambda: True, stored=lambda: None, agree=agree)
    assert asyncio.run(retimer("test")) == 2 * each
    with Session(engine) as s:
        t = q.tree(s, rid)
    assert [t.kernels[k].timings for k in kids] == [1 + each] * 2 and not retimer.due()
