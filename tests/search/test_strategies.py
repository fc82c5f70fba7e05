"""Search strategies (search/strategies.py) end to end through the controller and a real store, on the offline and
the replay providers, with the in-process pool of fakes.py: the tree each strategy makes, exact evaluation budgets,
resume after a kill under each, and no idea or kernel repeated."""
from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from sqlmodel import select

from kernelsearch.agent.base import ChatRequest
from kernelsearch.search import strategies
from kernelsearch.search.controller import Controller
from kernelsearch.store import Idea, Run, session_scope
from kernelsearch.store import queries as q
from tests.helpers import ONLINE, code_reply, replay_file
from tests.search.fakes import FakePool, Killed, config, drive, fake_result, new_run

STRATEGIES = ["branching", "sequential", "best_of_n", "evolutionary"]


def _tree(engine, run_id):
    """The run's tree and its Run row; each idea row also carries its meta_json (the strategy it records)."""
    with session_scope(engine) as s:
        t = q.tree(s, run_id)
        metas = {i.id: i.meta_json for i in s.exec(select(Idea).where(Idea.run_id == run_id))}
        run = s.get(Run, run_id)
    for i in t.ideas.values():
        i.meta_json = metas[i.id]
    return t, run


def _eval_order(t):
    return sorted((k for k in t.kernels.values() if k.eval_id is not None), key=lambda k: k.eval_id)


def spent_by_round(events) -> dict[int, set[int]]:
    """The kernels the controller marked spent (a round on them stored nothing new), by the round that did."""
    out: dict[int, set[int]] = {}
    for kind, data in events:
        if kind == "spent":
            out.setdefault(data["round"], set()).update(data["kernels"])
    return out


def check_shape(t, cfg, strategy, spent: dict[int, set[int]]):
    """The tree a strategy must make, whatever the provider: what every round's ideas hang under and how many."""
    s = cfg.search
    root = min(t.kernels)
    assert {json.loads(i.meta_json)["strategy"] for i in t.ideas.values()} == {strategy}
    rounds = sorted({i.round for i in t.ideas.values()})
    for rnd in rounds:
        ideas = [i for i in t.ideas.values() if i.round == rnd]
        parents = [i.parent_kernel_id for i in ideas]
        gone = set().union(*(v for r, v in spent.items() if r < rnd))
        before = [k for k in _eval_order(t) if k.round < rnd]
        ok_before = [k for k in before if k.status == "ok" and k.id not in gone]
        for i in ideas:
            assert len(t.branches_of.get(i.id, [])) <= i.branches_wanted
        if strategy == "branching":
            assert len(ideas) <= s.ideas_per_round and len(set(parents)) <= s.seeds_per_round
            assert all(i.branches_wanted == s.branches_per_idea for i in ideas)
            best = max(ok_before, key=lambda k: (k.speedup, -k.id))
            assert best.id in parents or len(ideas) == 0 or rnd == rounds[-1]   # the best seed gets its ideas
        elif strategy == "sequential":
            assert len(ideas) == 1 and ideas[0].branches_wanted == 1
            cur, speed = root, None   # keep if faster, else revert to the best
            for k in ok_before:
                if speed is None or k.speedup > speed:
                    cur, speed = k.id, k.speedup
            assert parents == [cur], (rnd, parents, cur)
        elif strategy == "best_of_n":
            assert set(parents) == {root}
        elif strategy == "evolutionary":
            assert len(set(parents)) == len(parents) <= s.ideas_per_round
            assert all(i.branches_wanted == 1 for i in ideas)
            assert set(parents) <= {k.id for k in ok_before}
    if strategy == "best_of_n":
        assert all(t.depth_of(k) <= 1 for k in t.kernels)   # never revised


def check_no_repeats(t):
    """No kernel twice in the run; no idea tried again on a kernel whose lineage already tried it."""
    hashes = [k.code_hash for k in t.kernels.values()]
    assert len(hashes) == len(set(hashes))
    for i in t.ideas.values():
        if i.parent_kernel_id is None:
            continue
        on = set(t.path_to(i.parent_kernel_id))
        same = [j.id for j in t.ideas.values() if j.id != i.id and j.parent_kernel_id in on
                and strategies.idea_key(j.title, j.text) == strategies.idea_key(i.title, i.text)]
        assert not same, (i.title, i.parent_kernel_id, same)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_offline_tree_shape_budget_and_no_repeats(tmp_path, strategy):
    cfg = config(tmp_path, search={"strategy": strategy}, budgets={"evaluations": 12})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    events = []
    drive(cfg, engine, rid, FakePool(), events)
    t, run = _tree(engine, rid)
    assert run.stop_reason == "budget_evaluations"
    assert len(t.kernels) == 12 and all(k.status is not None for k in t.kernels.values())   # exactly the budget
    check_shape(t, cfg, strategy, spent_by_round(events))
    check_no_repeats(t)
    # a fixed seed fixes the tree: the same search again makes the same kernels under the same ideas
    engine2, rid2 = new_run(tmp_path / "again.db", "r", cfg)
    drive(cfg, engine2, rid2, FakePool())
    t2, _ = _tree(engine2, rid2)
    assert sorted(k.code_hash for k in t2.kernels.values()) == sorted(k.code_hash for k in t.kernels.values())
    assert [(i.round, i.title) for i in t2.ideas.values()] == [(i.round, i.title) for i in t.ideas.values()]


def test_the_strategies_make_different_trees(tmp_path):
    shapes = {}
    for strategy in STRATEGIES:
        cfg = config(tmp_path / strategy, search={"strategy": strategy}, budgets={"evaluations": 12})
        (tmp_path / strategy).mkdir()
        engine, rid = new_run(tmp_path / strategy / "ks.db", "r", cfg)
        drive(cfg, engine, rid, FakePool())
        t, _ = _tree(engine, rid)
        shapes[strategy] = (len(t.ideas), max(t.depth_of(k) for k in t.kernels),
                            len({i.parent_kernel_id for i in t.ideas.values()}))
    assert shapes["sequential"][0] == 11                     # one idea per kernel after the starter
    assert shapes["best_of_n"][1] == 1 and shapes["best_of_n"][2] == 1   # all on the starter
    assert shapes["branching"][0] < shapes["sequential"][0]  # several branches per idea
    assert shapes["evolutionary"][2] > 2                     # many parents
    assert len(set(shapes.values())) == 4, shapes


def _replay_records(n_ideas_replies: int, ideas_each: int, n_code: int, broken: set[int] = frozenset()):
    recs = []
    for r in range(n_ideas_replies):
        recs.append({"role": "ideas", "text": json.dumps({"ideas": [
            {"title": f"idea {r}.{j}", "description": f"change number {r}.{j}"} for j in range(ideas_each)]})})
    for c in range(n_code):
        code = ONLINE.replace("BLOCK=2048", "BLOCK=1024") + f"\n# variant {c}\n" + ("# BROKEN\n" if c in broken else "")
        recs.append(code_reply(code))
    return recs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_replay_tree_shape_and_exact_budget(tmp_path, strategy):
    replay = replay_file(tmp_path, _replay_records(12, 2, 12))
    cfg = config(tmp_path, llm={"provider": "replay", "replay_file": str(replay)}, search={"strategy": strategy},
                 budgets={"evaluations": 7})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    events = []
    drive(cfg, engine, rid, FakePool(), events)
    t, run = _tree(engine, rid)
    assert run.stop_reason == "budget_evaluations" and len(t.kernels) == 7
    check_shape(t, cfg, strategy, spent_by_round(events))
    check_no_repeats(t)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_resume_after_a_kill_under_each_strategy(tmp_path, strategy):
    cfg = config(tmp_path, search={"strategy": strategy}, budgets={"evaluations": 12})
    clean_engine, clean_id = new_run(tmp_path / "clean.db", "r", cfg)
    drive(cfg, clean_engine, clean_id, FakePool())
    clean, _ = _tree(clean_engine, clean_id)

    db = tmp_path / "ks.db"
    engine, rid = new_run(db, "r", cfg)
    with pytest.raises(Killed):
        drive(cfg, engine, rid, FakePool(kill_after=6))
    rows = "SELECT id, kernel_id, status, speedup, purpose FROM evaluation ORDER BY id"
    con = sqlite3.connect(db)
    before = con.execute(rows).fetchall()
    assert len(before) == 6 and con.execute("SELECT status FROM run").fetchall() == [("running",)]
    con.close()

    pool = FakePool()
    drive(cfg, engine, rid, pool)   # a new controller on the same store: what `kernelsearch resume` does
    con = sqlite3.connect(db)
    after = con.execute(rows).fetchall()
    assert after[:6] == before                                     # nothing lost
    verdicts = [r for r in after if r[4] is None]                  # a kernel's evaluation; the others re-timings
    assert len({r[1] for r in verdicts}) == len(verdicts) == 12    # nothing redone; exactly the budget
    assert con.execute("SELECT status, stop_reason FROM run").fetchall() == [("finished", "budget_evaluations")]
    con.close()
    # the resumed controller evaluated the rest only: the kernels and re-timings stored since
    assert len(pool.codes) == len(after) - len(before)
    t, _ = _tree(engine, rid)
    last = max(k.round for k in t.kernels.values())
    # the same search as the uninterrupted one, up to its last round (whose budget cut depends on arrival order)
    assert (sorted(k.code_hash for k in t.kernels.values() if k.round < last)
            == sorted(k.code_hash for k in clean.kernels.values() if k.round < last))
    check_no_repeats(t)


def test_an_idea_its_lineage_tried_is_not_tried_again(tmp_path):
    # sequential: step 2 proposes step 1's idea again; whether step 1's kernel was kept or not, the idea is on the
    # new parent's lineage (on it or on the starter), so it is dropped and its code is never asked for
    same = {"title": "bigger blocks", "description": "4096 elements a program"}
    recs = [{"role": "ideas", "text": json.dumps({"ideas": [same]})},
            {"role": "ideas", "text": json.dumps({"ideas": [{**same, "title": "Bigger  blocks"}]})},
            {"role": "ideas", "text": json.dumps({"ideas": [{"title": "fewer warps", "description": "4 warps"}]})}]
    recs += _replay_records(0, 0, 3)
    replay = replay_file(tmp_path, recs)
    cfg = config(tmp_path, llm={"provider": "replay", "replay_file": str(replay)},
                 search={"strategy": "sequential", "rounds": 3}, budgets={"evaluations": 10})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    events = []
    drive(cfg, engine, rid, FakePool(), events)
    t, _ = _tree(engine, rid)
    assert [e[1]["title"] for e in events if e[0] == "repeat_idea"] == ["Bigger  blocks"]
    assert [i.title for i in t.ideas.values()] == ["bigger blocks", "fewer warps"]
    assert len(t.kernels) == 3


class Recording:
    """A provider wrapper that keeps every request."""

    def __init__(self, inner):
        self.inner, self.name, self.requests = inner, inner.name, []

    async def complete(self, request: ChatRequest):
        self.requests.append(request)
        return await self.inner.complete(request)


def test_an_idea_whose_branches_all_failed_says_why_in_the_next_idea_prompt(tmp_path):
    assert "shared memory" in fake_result("# BROKEN").error_text
    replay = replay_file(tmp_path, _replay_records(2, 1, 4, broken={0, 1}))
    cfg = config(tmp_path, llm={"provider": "replay", "replay_file": str(replay)},
                 search={"strategy": "branching", "rounds": 2, "ideas_per_round": 1}, budgets={"evaluations": 10})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    ctl = Controller(cfg.search_setup(), engine, rid, FakePool())
    rec = ctl.idea_writer.provider = Recording(ctl.idea_writer.provider)
    asyncio.run(ctl.run())
    prompts = [r.messages[-1].content for r in rec.requests]
    assert len(prompts) == 2
    assert "every branch failed" not in prompts[0]
    line = next(ln for ln in prompts[1].splitlines() if ln.startswith("- idea 0.0"))
    assert "every branch failed (2 evaluated)" in line
    assert "compile_error: the kernel does not compile" in line and "out of resource: shared memory" in line
