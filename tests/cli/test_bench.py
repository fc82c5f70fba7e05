"""`kernelsearch bench`: a folder of KernelBench-format problems as one job, through an `openai-compatible` server on
127.0.0.1. One run per problem into one store; a rerun skips finished problems (their evaluations do not grow) and
resumes one killed mid-way; the table and fast_p are read from the store."""
from __future__ import annotations

import io
import itertools
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
import yaml
from rich.console import Console
from sqlmodel import Session

from kernelsearch.bench import BenchError, Row, print_table, problem_files, read_config
from kernelsearch.store import open_store
from kernelsearch.store import queries as q
from tests.agent.loopback import LoopbackLLM
from tests.helpers import ROOT, cli

BATCH = ROOT / "tests" / "fixtures" / "problems" / "batch"
GOOD = (ROOT / "tests" / "fixtures" / "problems" / "relu_scale_kernel.py").read_text()   # right for 1, wrong for 2
_PY = re.compile(r"```python\n(.*?)^```", re.S | re.M)


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def _config(tmp_path, llm):
    path = tmp_path / "kb1.yaml"
    path.write_text(yaml.safe_dump({
        "store": str(tmp_path / "ks.db"), "device": "cpu",
        "llm": {"provider": "openai-compatible", "model": "loop-model", "base_url": llm.openai_base_url,
                "api_key_env": "LOOP_API_KEY", "max_retries": 1},
        "prices": {"loop-model": {"input": 1.0, "output": 2.0}},
        "search": {"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1, "first_kernels": 1, "concurrency": 1,
                   "timings": 1},   # no re-timing: a batch's kernels and resume are what is tested
        "evaluation": {"timeout_s": 60, "trials": 1}}))
    return path


def _evals(db) -> dict[str, int]:
    return dict(_rows(db, "SELECT r.name, count(e.id) FROM run r LEFT JOIN kernel k ON k.run_id = r.id "
                          "LEFT JOIN evaluation e ON e.kernel_id = k.id GROUP BY r.id"))


@pytest.mark.slow   # 23 s on 2 cores (a SIGKILL and a rerun); CI runs it with the slow set (.ci/run)
def test_bench_a_folder_killed_mid_way_then_rerun_skips_finished_and_resumes(tmp_path):
    n = itertools.count()
    asked = threading.Event()

    def code_for(messages):
        user = _user(messages)
        if "has no kernel yet" in user:   # a first kernel: the relu-scale kernel, made unique
            if "* self.scale + 1.0" in user and not asked.is_set():   # problem 2's first call: the batch is killed
                asked.set()
                time.sleep(3)
            return GOOD + f"# first {next(n)}\n"
        return f"# variant {next(n)}\n" + _PY.findall(user)[-1]   # an idea's branch: the seed, renamed

    db = tmp_path / "ks.db"
    env = {"LOOP_API_KEY": "k", "COLUMNS": "200"}
    with LoopbackLLM(code_for=code_for) as llm:
        cfg = _config(tmp_path, llm)
        # first only problem 1 (by its KernelBench number)
        r = cli("bench", str(BATCH), "--config", str(cfg), "--problems", "1", cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "batch kb1: 1 problems" in r.stdout
        assert _rows(db, "SELECT name, status FROM run") == [("kb1-1_relu_scale", "finished")]
        first = _evals(db)
        assert first["kb1-1_relu_scale"] == 2          # round 0's first kernel and round 1's branch
        assert "fast_p over eager (1 problems): fast_0 1.000" in r.stdout

        # the whole folder, killed (SIGKILL) while problem 2's first kernel is being written
        calls = llm.count()
        proc = subprocess.Popen([sys.executable, "-m", "kernelsearch", "bench", str(BATCH), "--config", str(cfg)],
                                cwd=tmp_path, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            assert asked.wait(120), "problem 2 was never started"
        finally:
            proc.kill()
        out, _ = proc.communicate(timeout=30)
        assert "[1/2] 1_relu_scale (run kb1-1_relu_scale): finished, not searched again" in out
        assert "[2/2] 2_relu_scale_shift (run kb1-2_relu_scale_shift): starting" in out
        assert _rows(db, "SELECT name, status FROM run ORDER BY id") == [("kb1-1_relu_scale", "finished"),
                                                                         ("kb1-2_relu_scale_shift", "running")]
        assert _evals(db) == {**first, "kb1-2_relu_scale_shift": 0}

        # the same command again: problem 1 is not searched again, problem 2 goes on where it stopped
        r = cli("bench", str(BATCH), "--config", str(cfg), cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "[1/2] 1_relu_scale (run kb1-1_relu_scale): finished, not searched again" in r.stdout
        assert "[2/2] 2_relu_scale_shift (run kb1-2_relu_scale_shift): resuming (running)" in r.stdout
        assert llm.count() == calls + 3                # the killed call, then two first kernels
    evals = _evals(db)
    assert evals["kb1-1_relu_scale"] == first["kb1-1_relu_scale"]
    assert evals["kb1-2_relu_scale_shift"] == 2        # two first kernels, both wrong
    assert _rows(db, "SELECT e.status FROM evaluation e JOIN kernel k ON k.id = e.kernel_id JOIN run r "
                     "ON r.id = k.run_id WHERE r.name = 'kb1-2_relu_scale_shift'") == [("incorrect",)] * 2
    assert _rows(db, "SELECT name, status FROM run ORDER BY id") == [("kb1-1_relu_scale", "finished"),
                                                                     ("kb1-2_relu_scale_shift", "finished")]
    # the table, from the store: problem 1 correct with its best speedup (the run's reference figure over its fastest
    # kernel's own time), problem 2 not
    engine = open_store(db, readonly=True)
    with Session(engine) as s:
        st = q.run_stats(s, q.get_run(s, "kb1-1_relu_scale").id)
    engine.dispose()
    best = st.best_speedup
    assert best == st.reference_ms / st.best_time_ms
    tokens = dict(_rows(db, "SELECT r.name, sum(c.tokens_in + c.tokens_out) FROM llmcall c JOIN run r "
                            "ON r.id = c.run_id GROUP BY r.id"))
    lines = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line[:2] in ("1_", "2_")}
    one, two = lines["1_relu_scale"], lines["2_relu_scale_shift"]
    assert one[1:4] == ["finished", "(rounds_done)", "yes"] and one[4] == f"{best:.3g}x"
    assert one[6:8] == ["2", str(tokens["kb1-1_relu_scale"])]
    assert two[1:5] == ["finished", "(rounds_done)", "no", "-"]
    assert two[6:8] == ["2", str(tokens["kb1-2_relu_scale_shift"])]
    fast = "fast_p over eager (2 problems): fast_0 0.500, " + ", ".join(
        f"fast_{p} {0.5 if best > float(p) else 0.0:.3f}" for p in ("1", "1.5", "2"))
    assert fast in r.stdout


def test_problem_files_from_a_folder_a_glob_and_numbers(tmp_path):
    assert [f.name for f in problem_files([str(BATCH)])] == ["1_relu_scale.py", "2_relu_scale_shift.py"]
    assert [f.name for f in problem_files([str(BATCH / "2_*.py")])] == ["2_relu_scale_shift.py"]
    assert [f.name for f in problem_files([str(BATCH)], "2-5")] == ["2_relu_scale_shift.py"]
    both = problem_files([str(BATCH / "2_relu_scale_shift.py"), str(BATCH)])   # listed twice: searched once
    assert [f.name for f in both] == ["2_relu_scale_shift.py", "1_relu_scale.py"]
    for paths, problems, says in [
            ([str(tmp_path / "nope")], None, "no such file or folder"),
            ([str(tmp_path / "*.py")], None, "no file matches this pattern"),
            ([str(tmp_path)], None, "a folder with no .py problem files"),
            ([str(BATCH)], "3-1", "'3-1' is not a number or a range"),
            ([str(BATCH)], "x", "'x' is not a number or a range"),
            ([str(BATCH)], "9", "no problem file has one of these numbers"),
            ([str(ROOT / "tests" / "fixtures" / "problems" / "mm8.py")], "1", "mm8.py has no number")]:
        with pytest.raises(BenchError, match=re.escape(says)):
            problem_files(paths, problems)


@pytest.mark.parametrize("text, says", [("problem: softmax\n", "problem: bench gives each run its problem"),
                                        ("starter: k.py\n", "starter: one starter file cannot fit"),
                                        ("- a\n", "the top level must be a mapping")])
def test_a_config_that_cannot_serve_a_batch_is_refused(tmp_path, text, says):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(BenchError, match=says):
        read_config(cfg)


def test_cli_refuses_in_one_line_before_any_search(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("problem: softmax\n")
    r = cli("bench", str(BATCH), "--config", str(cfg), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"error: {cfg}: problem: bench gives each run its problem from PATH")
    # a config with a misspelt key: the batch stops before any problem is searched, and nothing is stored
    cfg.write_text(yaml.safe_dump({"store": str(tmp_path / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
                                   "serch": {}}))
    r = cli("bench", str(BATCH), "--config", str(cfg), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"error: {cfg}: serch: unknown key") and "(for 1_relu_scale.py)" in r.stderr
    assert not (tmp_path / "ks.db").exists()


def test_table_prints_fast_p_over_torch_compile_where_measured():
    rows = [Row("1_a", "b-1_a", "finished (rounds_done)", best=3.0, best_compile=1.2, correct=True, evaluations=8,
                tokens=1000, cost_usd=0.5),
            Row("2_b", "b-2_b", "finished (rounds_done)", best=1.2, best_compile=None, correct=True),
            Row("3_c", "b-3_c", "not started")]
    buf = io.StringIO()
    print_table(rows, Console(file=buf, width=60))
    out = buf.getvalue()
    assert "fast_p over eager (3 problems): fast_0 0.667, fast_1 0.667, fast_1.5 0.333, fast_2 0.333" in out
    assert ("fast_p over torch.compile (1 of 3 problems measured; the others count as not faster): fast_1 0.333, "
            "fast_1.5 0.000, fast_2 0.000") in out
    assert out.splitlines()[1].split() == ["1_a", "finished", "(rounds_done)", "yes", "3x", "1.2x", "8", "1000",
                                           "$0.5000", "-"]
    assert out.splitlines()[3].split() == ["3_c", "not", "started", "no", "-", "-", "0", "0", "$0.0000", "-"]
    assert "allow_torch: none (strict: every kernel does all its work in its own kernels)" in out


def test_table_reports_the_allowance_and_which_best_kernels_call_torch():
    """A batch run with `evaluation.allow_torch`: the allowance and the library calls of the best kernels are
    printed beside fast_p, and a best kernel's calls in its row."""
    rows = [Row("1_a", "b-1_a", "finished", best=2.0, correct=True, allowed=["matmul", "linear"],
                torch_ops="linear"),
            Row("2_b", "b-2_b", "finished", best=1.1, correct=True, allowed=["matmul", "linear"], torch_ops=""),
            Row("3_c", "b-3_c", "finished", correct=False, allowed=["matmul", "linear"], torch_ops="matmul")]
    buf = io.StringIO()
    print_table(rows, Console(file=buf, width=60))
    lines = buf.getvalue().splitlines()
    assert lines[1].split()[-1] == "linear" and lines[2].split()[-1] == "-" and lines[3].split()[-1] == "-"
    assert lines[4] == ("allow_torch: matmul, linear; the best kernels of 1 of 3 problems call torch for part of "
                        "the work (linear)")
    assert lines[5].startswith("fast_p over eager (3 problems): fast_0 0.667, fast_1 0.667, fast_1.5 0.333")


def test_a_problem_the_judge_never_evaluated_is_marked_and_named_under_fast_p():
    """Every evaluation harness_error (the judge's own failure): `unjudged`, not `no`, and named under fast_p, where
    it still counts as not correct. One harness_error among verdicts is a plain `no`."""
    rows = [Row("1_a", "b-1_a", "finished", best=2.0, correct=True, evaluations=4),
            Row("2_b", "b-2_b", "finished", correct=False, evaluations=3, unjudged=3),
            Row("3_c", "b-3_c", "finished", correct=False, evaluations=3, unjudged=1)]
    buf = io.StringIO()
    print_table(rows, Console(file=buf, width=60))
    lines = buf.getvalue().splitlines()
    assert re.search(r"^2_b\s+finished\s+unjudged\s", lines[2]) and re.search(r"^3_c\s+finished\s+no\s", lines[3])
    assert "fast_0 0.333" in buf.getvalue()
    assert any(ln.startswith("1 of 3 problems not judged") and ln.rstrip().endswith("judges them again")
               and ": 2_b;" in ln for ln in lines)


@pytest.mark.slow   # 22 s on 2 cores
def test_bench_jobs_searches_problems_at_once_on_one_pool_with_the_same_table(tmp_path):
    """--jobs 2: both problems' first kernels are asked for before either is answered (they run at once), and the
    store ends as a batch one after another ends: both runs finished, two evaluations each, the same verdicts."""
    seen = {1: threading.Event(), 2: threading.Event()}
    overlap = []
    n = itertools.count()

    def code_for(messages):
        user = _user(messages)
        if "has no kernel yet" in user:
            me = 2 if "* self.scale + 1.0" in user else 1
            if not seen[me].is_set():
                seen[me].set()
                overlap.append(seen[3 - me].wait(30))   # the other problem's first call, while this one waits
            return GOOD + f"# first {next(n)}\n"
        return f"# variant {next(n)}\n" + _PY.findall(user)[-1]

    db = tmp_path / "ks.db"
    with LoopbackLLM(code_for=code_for) as llm:
        cfg = _config(tmp_path, llm)
        r = cli("bench", str(BATCH), "--config", str(cfg), "--jobs", "2", cwd=tmp_path,
                env={"LOOP_API_KEY": "k", "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "batch kb1: 2 problems into" in r.stdout and "2 at once on one pool of evaluators" in r.stdout
    assert overlap == [True, True]
    assert _rows(db, "SELECT name, status FROM run ORDER BY name") == [("kb1-1_relu_scale", "finished"),
                                                                      ("kb1-2_relu_scale_shift", "finished")]
    assert _evals(db) == {"kb1-1_relu_scale": 2, "kb1-2_relu_scale_shift": 2}
    statuses = dict(_rows(db, "SELECT r.name, group_concat(e.status) FROM evaluation e JOIN kernel k "
                              "ON k.id = e.kernel_id JOIN run r ON r.id = k.run_id GROUP BY r.id"))
    assert statuses == {"kb1-1_relu_scale": "ok,ok", "kb1-2_relu_scale_shift": "incorrect,incorrect"}
    assert "fast_p over eager (2 problems): fast_0 0.500" in r.stdout
    bad = cli("bench", str(BATCH), "--config", str(cfg), "--jobs", "0", cwd=tmp_path, env={"LOOP_API_KEY": "k"})
    assert bad.returncode != 0 and "--jobs 0: give 1 or more problems at once" in bad.stdout + bad.stderr
