"""Round 0 from the reference: a KernelBench file with no starter, searched through an `openai-compatible` server on
127.0.0.1 (the real openai SDK). The coder writes the first kernels from the reference; the correct ones seed round
1; a run whose first kernels are all wrong goes on, and the next round's coder is shown the failures."""
from __future__ import annotations

import itertools
import re
import sqlite3

import pytest

from tests.agent.loopback import LoopbackLLM
from tests.helpers import ROOT, cli, write_config

PROBLEM = ROOT / "tests" / "fixtures" / "problems" / "relu_scale.py"
GOOD = (ROOT / "tests" / "fixtures" / "problems" / "relu_scale_kernel.py").read_text()
WRONG = GOOD.replace("tl.maximum(x, 0.0) * scale", "tl.maximum(x, 0.0)")   # forgets the scale
assert WRONG != GOOD
_BRANCH = re.compile(r"branch (\d+) of (\d+)")
_PY = re.compile(r"```python\n(.*?)^```", re.S | re.M)


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _config(tmp_path, llm, **over):
    over["search"] = {"timings": 1, **over.get("search", {})}   # no re-timing: these tests are about first kernels
    return write_config(tmp_path, problem=str(PROBLEM),
                        llm={"provider": "openai-compatible", "model": "loop-model", "base_url": llm.openai_base_url,
                             "api_key_env": "LOOP_API_KEY", "max_retries": 1},
                        prices={"loop-model": {"input": 1.0, "output": 2.0}}, **over)


def _user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_round_zero_is_written_from_the_reference_and_seeds_round_one(tmp_path):
    variants = itertools.count(1)

    def code_for(messages):
        user = _user(messages)
        if "has no kernel yet" in user:   # a first kernel: branch 0 is wrong, branch 1 right
            branch = int(_BRANCH.search(user).group(1))
            return WRONG if branch == 0 else GOOD
        return f"# variant {next(variants)}\n" + _PY.findall(user)[-1]   # an idea's branch: the seed, renamed

    with LoopbackLLM(code_for=code_for) as llm:
        cfg = _config(tmp_path, llm, search={"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1,
                                             "first_kernels": 2})
        r = cli("run", str(cfg), "--name", "kb", cwd=tmp_path, env={"LOOP_API_KEY": "k"})
        assert r.returncode == 0, r.stdout + r.stderr
        prompts = [_user(s.messages) for s in llm.requests]
    assert "the coder writes 2 first kernels from the reference" in " ".join(r.stdout.split())
    out = " ".join(r.stdout.split())   # the console wraps long lines
    assert "correctness on cpu_small[batch_size=5,dim=251; float32], cpu[" in out
    assert "timed: own[batch_size=16,dim=1000; float32] (on the CPU: cpu[batch_size=17,dim=1001" in out
    first = [p for p in prompts if "has no kernel yet" in p]
    assert len(first) == 2 and all("class Model(nn.Module)" in p for p in first)   # the reference is in the prompt
    assert sum('"ideas"' in p for p in prompts) == 1                              # round 1's idea call
    db = tmp_path / "ks.db"
    r0 = _rows(db, "SELECT k.branch, k.parent_kernel_id, e.status, i.title FROM kernel k JOIN evaluation e "
                   "ON e.kernel_id = k.id AND e.purpose IS NULL JOIN idea i ON i.id = k.idea_id WHERE k.round = 0 "
                   "ORDER BY k.branch")
    assert [(b, p, st) for b, p, st, _ in r0] == [(0, None, "incorrect"), (1, None, "ok")]
    assert r0[0][3] == "First kernels from the reference"
    good_id, = _rows(db, "SELECT k.id FROM kernel k JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL "
                         "WHERE k.round = 0 AND e.status = 'ok'")[0]
    # round 1 starts from the correct first kernel, and its kernel is correct too
    assert _rows(db, "SELECT i.parent_kernel_id, e.status FROM kernel k JOIN idea i ON i.id = k.idea_id "
                     "JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL "
                     "WHERE k.round = 1") == [(good_id, "ok")]
    # the reference is the baseline, never a candidate: every kernel is the coder's, and none is the reference
    assert _rows(db, "SELECT count(*) FROM kernel WHERE llm_call_id IS NULL OR code LIKE '%class Model(%'") == [(0,)]
    assert _rows(db, "SELECT count(*) FROM evaluation WHERE ref_time_ms > 0") == [(2,)]
    assert _rows(db, "SELECT status, stop_reason FROM run") == [("finished", "rounds_done")]
    tree = cli("tree", "kb", "--db", str(db), cwd=tmp_path)
    assert "First kernels from the reference" in tree.stdout and "incorrect" in tree.stdout, tree.stdout


@pytest.mark.slow   # 21 s on 2 cores; test_all_wrong_says_so_and_stays_within_its_rounds stays in make test
def test_no_correct_first_kernel_goes_on_and_the_next_coder_sees_the_failures(tmp_path):
    def code_for(messages):
        user = _user(messages)
        if "has no kernel yet" not in user:   # round 2's idea, on the correct kernel
            return "# a variant\n" + _PY.findall(user)[-1]
        return GOOD if "were not correct" in user else WRONG

    with LoopbackLLM(code_for=code_for) as llm:
        cfg = _config(tmp_path, llm, search={"rounds": 2, "ideas_per_round": 1, "branches_per_idea": 1})
        r = cli("run", str(cfg), "--name", "kb", cwd=tmp_path, env={"LOOP_API_KEY": "k"})
        assert r.returncode == 0, r.stdout + r.stderr
        prompts = [_user(s.messages) for s in llm.requests]
    assert "no first kernel is correct yet: round 1 writes first kernels again" in " ".join(r.stdout.split())
    db = tmp_path / "ks.db"
    rows = _rows(db, "SELECT k.id, k.round, k.parent_kernel_id, e.status, e.reason FROM kernel k "
                     "JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL ORDER BY k.id")
    assert [(rnd, p, st) for _, rnd, p, st, _ in rows[:2]] == [(0, None, "incorrect"), (1, None, "ok")]
    # round 1's coder was shown round 0's kernel and why it failed
    wrong_id, wrong_reason = rows[0][0], rows[0][4]
    assert f"### Kernel {wrong_id}: incorrect: {wrong_reason}" in prompts[1]
    assert "tl.maximum(x, 0.0), mask=mask)" in prompts[1]
    # round 2 is an idea round on the now correct kernel
    assert '"ideas"' in prompts[2] and len(rows) == 3 and rows[2][1] == 2
    assert _rows(db, "SELECT status, stop_reason FROM run") == [("finished", "rounds_done")]


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_all_wrong_says_so_and_stays_within_its_rounds(tmp_path):
    with LoopbackLLM(code_for=lambda messages: WRONG + f"# {len(_user(messages))}\n") as llm:
        cfg = _config(tmp_path, llm, search={"rounds": 1, "first_kernels": 1})
        r = cli("run", str(cfg), "--name", "kb", cwd=tmp_path, env={"LOOP_API_KEY": "k"})
        assert r.returncode == 0, r.stdout + r.stderr
        assert llm.count() == 2   # round 0 and round 1, one first kernel each; no idea call
    assert "no correct kernel found before the run stopped (rounds_done)" in " ".join(r.stdout.split())
    assert _rows(tmp_path / "ks.db", "SELECT k.round, e.status FROM kernel k JOIN evaluation e ON e.kernel_id = k.id "
                                      "AND e.purpose IS NULL ORDER BY k.id") == [(0, "incorrect"), (1, "incorrect")]


@pytest.mark.slow   # 16 s on 2 cores; round 0 from the reference stays in make test (test_round_zero_...)
def test_a_family_with_starter_none_starts_from_the_coder_offline(tmp_path):
    """`starter: none` on a family: round 0 is written by the coder (the offline provider writes its space's
    default, which is what starter.py holds, and a neighbour), each kernel with its coder call."""
    cfg = write_config(tmp_path, starter="none",
                       search={"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1, "first_kernels": 2})
    r = cli("run", str(cfg), "--name", "fam", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    db = tmp_path / "ks.db"
    rows = _rows(db, "SELECT k.round, k.idea_id IS NULL, k.parent_kernel_id, e.status, k.code FROM kernel k "
                     "JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL "
                     "JOIN llmcall c ON c.id = k.llm_call_id WHERE c.role = 'code' ORDER BY k.id")
    assert [(rnd, no_idea, p) for rnd, no_idea, p, _, _ in rows[:2]] == [(0, 0, None), (0, 0, None)]
    assert all(st == "ok" for _, _, _, st, _ in rows) and len(rows) == 3
    assert "the coder writes 2 first kernels from the reference" in " ".join(r.stdout.split())
    assert rows[0][4] != rows[1][4]   # two different first kernels
