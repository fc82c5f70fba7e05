"""The store's read queries against a known tree, and that they cost a fixed number of SQL statements."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlmodel import Session

from kernelsearch.store import queries as q
from kernelsearch.store.database import open_store
from tests.views.known_store import (
    ALPHA_BEST_PATH,
    ALPHA_IDEA_OF,
    ALPHA_IDEA_PARENT,
    ALPHA_SPEEDUP,
    ALPHA_STATUS,
    build_known_store,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    e = open_store(build_known_store(tmp_path_factory.mktemp("queries") / "known.db"), readonly=True)
    yield e
    e.dispose()


@pytest.fixture
def s(engine):
    with Session(engine) as session:
        yield session


def test_get_run_and_list_runs(s):
    assert q.get_run(s, "alpha").id == 1 and q.get_run(s, "beta").id == 2
    assert q.get_run(s, "nope") is None
    assert [r.name for r in q.list_runs(s)] == ["alpha", "beta"]


def test_tree_shape(s):
    t = q.tree(s, 1)
    assert set(t.kernels) == set(ALPHA_STATUS)                 # beta's kernels stay out
    assert t.roots == [1] and t.top_ideas == []
    assert t.ideas_of == {1: [1, 2], 2: [3, 5], 5: [4]}
    assert t.branches_of == {1: [2, 3], 2: [4, 5], 3: [6, 7], 4: [8, 9]}
    assert {i.id: i.parent_kernel_id for i in t.ideas.values()} == ALPHA_IDEA_PARENT
    assert {k.id: k.state for k in t.kernels.values()} == ALPHA_STATUS
    assert {k.id: k.idea_id for k in t.kernels.values() if k.idea_id} == ALPHA_IDEA_OF
    assert {k.id: k.speedup for k in t.kernels.values() if k.speedup is not None} == ALPHA_SPEEDUP
    assert t.parent_of(6) == 2 and t.parent_of(8) == 5 and t.parent_of(1) is None
    assert t.path_to(6) == ALPHA_BEST_PATH and t.path_to(9) == [1, 5, 9]
    assert t.depth_of(1) == 0 and t.depth_of(3) == 1 and t.depth_of(9) == 2
    assert t.best_kernel().id == 6 and [k.id for k in t.best(3)] == [6, 2, 5]
    assert t.kernels[9].status is None and t.kernels[9].eval_id is None
    assert t.kernels[6].timing_kind == "cpu-interpreter" and t.kernels[6].roofline_fraction == 0.55
    beta = q.tree(s, 2)
    assert set(beta.kernels) == {20, 21} and beta.best_kernel().id == 21
    with pytest.raises(LookupError):
        q.tree(s, 99)


def test_lineage_runs_from_the_starter_to_the_kernel(s):
    chain = q.lineage(s, 6)
    assert [k.id for k, _ in chain] == ALPHA_BEST_PATH
    assert [i.id if i else None for _, i in chain] == [None, 1, 3]
    assert chain[-1][0].speedup == 2.5 and chain[1][1].title == "one pass with an online max"
    assert [k.id for k, _ in q.lineage(s, 1)] == [1]
    assert [k.id for k, _ in q.lineage(s, 9)] == [1, 5, 9]
    assert q.lineage(s, 999) == []


def test_best_kernels(s):
    assert [k.id for k in q.best_kernels(s, 1, 3)] == [6, 2, 5]
    assert [k.id for k in q.best_kernels(s, 1, 10)] == [6, 2, 5, 1]   # only correct kernels
    assert [k.id for k in q.best_kernels(s, 2, 5)] == [21, 20]


def test_run_stats(s):
    st = q.run_stats(s, 1)
    assert st.by_status == {"ok": 4, "incorrect": 1, "compile_error": 1, "timeout": 1, "crash": 1}
    assert (st.kernels, st.evaluations, st.queued, st.ideas, st.rounds) == (9, 8, 1, 5, 2)
    assert (st.best_kernel_id, st.best_speedup, st.best_speedup_compile, st.best_roofline_fraction) == (6, 2.5, 2.0,
                                                                                                        0.55)
    assert (st.tokens_in, st.tokens_out, st.tokens) == (4800, 2200, 7000)
    assert st.cost_usd == pytest.approx(0.045) and st.unpriced_calls == 1
    assert (st.llm_calls, st.llm_errors) == (4, 1)
    assert st.wall_s == 590.0                                   # Run.elapsed_s, summed over resumes
    assert st.timing_kinds == ["cpu-interpreter"] and st.correct == 4
    beta = q.run_stats(s, 2)
    assert (beta.evaluations, beta.best_kernel_id, beta.cost_usd, beta.timing_kinds) == (2, 21, 0.5, ["cuda-events"])


def test_round_stats(s):
    rs = {r.round: r for r in q.round_stats(s, 1)}
    assert sorted(rs) == [0, 1, 2]
    got = {r: (x.ideas, x.branches, x.evaluated, x.correct, x.best_speedup, x.best_so_far, x.tokens)
           for r, x in rs.items()}
    assert got == {0: (0, 1, 1, 1, 1.0, 1.0, 0), 1: (2, 4, 4, 2, 1.5, 1.5, 4500), 2: (3, 4, 3, 1, 2.5, 2.5, 2200)}
    assert rs[1].by_status == {"ok": 2, "incorrect": 1, "compile_error": 1}
    assert rs[1].cost_usd == pytest.approx(0.03) and rs[2].cost_usd == pytest.approx(0.015)
    assert (rs[0].calls, rs[1].calls, rs[2].calls, rs[1].unpriced) == (0, 2, 1, 0)


def test_progress_is_in_arrival_order_with_the_best_so_far(s):
    pts = q.progress(s, 1)
    assert [p.n for p in pts] == list(range(1, 9))
    assert [p.kernel_id for p in pts] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [p.best_so_far for p in pts] == [1.0, 1.5, 1.5, 1.5, 1.5, 2.5, 2.5, 2.5]
    assert [p.speedup for p in pts] == [1.0, 1.5, None, None, 1.2, 2.5, None, None]
    assert pts[0].t_s == pytest.approx(54.0, abs=0.01) and pts[5].t_s == pytest.approx(360.0, abs=0.01)


def test_cost_breakdown_codes_and_errors(s):
    rows = {(c.role, c.provider, c.model): c for c in q.cost_breakdown(s, 1)}
    assert set(rows) == {("ideas", "offline", "rules"), ("code", "offline", "rules"), ("code", "openai", "gpt-x")}
    ideas = rows[("ideas", "offline", "rules")]
    assert (ideas.calls, ideas.tokens_in, ideas.tokens_out, ideas.unpriced) == (2, 2500, 1200, 0)
    assert ideas.cost_usd == pytest.approx(0.025)
    gpt = rows[("code", "openai", "gpt-x")]
    assert (gpt.calls, gpt.errors, gpt.unpriced, gpt.latency_s) == (1, 1, 1, 30.0)
    by_kernel, codes = q.kernel_codes(s, 1)
    assert set(by_kernel) == set(ALPHA_STATUS) and len(codes) == 9
    assert "mask=offs <= n_cols" in codes[by_kernel[3]]
    assert set(q.error_texts(s, 1)) == {3, 4}
    assert '"peak_vram_mb": 12.5' in q.detail_jsons(s, 1)[2]


def _bench_builder():
    spec = importlib.util.spec_from_file_location("bench_views", ROOT / "bench" / "bench_views.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build


def _count_statements(engine, fn) -> int:
    n = [0]

    def count(*_a, **_k):
        n[0] += 1

    event.listen(engine, "before_cursor_execute", count)
    try:
        with Session(engine) as session:
            fn(session)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return n[0]


def test_tree_and_report_cost_a_fixed_number_of_statements(engine, tmp_path):
    """A run of 9 kernels and one of 600 take the same statements: nothing is queried per kernel."""
    from kernelsearch.views.report import build_report

    build = _bench_builder()
    big = open_store(tmp_path / "big.db")
    name = build(tmp_path / "big.db", 600)

    def work(run_name):
        def fn(session):
            run = q.get_run(session, run_name)
            t = q.tree(session, run.id)
            assert len(t.kernels) >= 9
            q.run_stats(session, run.id)
            build_report(session, run)
        return fn

    small_n = _count_statements(engine, work("alpha"))
    big_n = _count_statements(big, work(name))
    big.dispose()
    assert small_n == big_n and small_n < 40
