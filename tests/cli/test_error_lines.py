"""Bad input to `eval`, `run` and `resume` is one clear line on stderr (no traceback) and a non-zero exit code:
problem files that do not load, stores that are not stores or are damaged ones, a candidate over the size cap,
two runs creating one new store at once, and a run whose rows are corrupt.

Nothing here reaches a worker: the problem's and the store's errors come before any evaluation, so each case
runs in-process (typer's CliRunner) in about a second; the entry points themselves (`python -m kernelsearch`,
`python -m kernelsearch.cli`) and the concurrent runs are real subprocesses.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session, select
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.config import parse_config
from kernelsearch.judge.static import MAX_SOURCE_BYTES, check_source
from kernelsearch.judge.status import CandidateFailure, Status
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Kernel, Run
from tests.helpers import ONLINE, cli
from tests.views.known_store import build_known_store

GOOD_PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 9)]

def get_init_inputs():
    return []
'''

BAD_PROBLEMS = {
    "syntax": (GOOD_PROBLEM.replace("class Model(nn.Module):", "class Model(nn.Module)"),
               "syntax error at line 4: expected ':'"),
    "get_inputs_raises": (GOOD_PROBLEM.replace("return [torch.randn(4, 9)]", "raise KeyError('no shapes')"),
                          "get_inputs() raised KeyError: 'no shapes'"),
    "get_inputs_odd_exception": (GOOD_PROBLEM.replace(
        "return [torch.randn(4, 9)]",
        "class Odd(Exception):\n        def __str__(self):\n            raise ValueError('no str')\n"
        "    raise Odd()"), "get_inputs() raised Odd: (its message cannot be printed)"),
    "no_model": (GOOD_PROBLEM.replace("class Model(nn.Module):", "class Reference(nn.Module):"),
                 "defines no Model"),
    "import_raises": ("import torch\nraise RuntimeError('needs a GPU\\nand more')\n",
                      "loading it raised RuntimeError: needs a GPU"),
}

runner = CliRunner()


def invoke(*args) -> tuple[int, str, str]:
    res = runner.invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"uncaught {res.exception!r}:\n{res.output}") from res.exception
    return res.exit_code, res.stdout, res.stderr


def one_error_line(result: tuple[int, str, str], *wanted: str) -> str:
    code, out, err = result
    assert code != 0, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for w in wanted:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def _config(tmp: Path, **over) -> dict:
    base = {"problem": "softmax", "store": str(tmp / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
            "search": {"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1, "concurrency": 1},
            "evaluation": {"timeout_s": 60, "trials": 1, "fork_server": False}}
    base.update(over)
    return base


def _write_config(tmp: Path, data: dict, name: str = "c.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return path


def _file_problem_config(tmp: Path, prob: Path) -> dict:
    starter = tmp / "starter.py"
    starter.write_text(ONLINE)
    replay = tmp / "replay.jsonl"
    replay.write_text("")
    return _config(tmp, problem=str(prob), starter=str(starter),
                   llm={"provider": "replay", "replay_file": str(replay)})


# -- problem files ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(BAD_PROBLEMS))
def test_a_bad_problem_file_is_one_line_from_eval_run_and_resume(tmp_path, kind):
    source, wanted = BAD_PROBLEMS[kind]
    prob = tmp_path / f"{kind}.py"
    prob.write_text(GOOD_PROBLEM)
    data = _file_problem_config(tmp_path, prob)
    # a run stored while the file was good (resume reads its config from the store)
    engine = open_store(tmp_path / "ks.db")
    with Session(engine) as s:
        s.add(Run(name="r", problem=str(prob), config_json=parse_config(data).model_dump_json(),
                  status="interrupted"))
        s.commit()
    engine.dispose()
    prob.write_text(source)
    cand = tmp_path / "cand.py"
    cand.write_text(ONLINE)

    one_error_line(invoke("eval", prob, cand), f"problem file {prob}", wanted)
    cfg = _write_config(tmp_path, {**data, "store": str(tmp_path / "new.db")})
    one_error_line(invoke("run", cfg), f"problem file {prob}", wanted)
    assert not (tmp_path / "new.db").exists()   # refused before anything was stored
    one_error_line(invoke("resume", "r", "--db", tmp_path / "ks.db"), f"problem file {prob}", wanted)
    e = open_store(tmp_path / "ks.db", readonly=True)
    with Session(e) as s:
        assert s.get(Run, 1).status == "interrupted"   # the refused resume changed nothing
    e.dispose()


def test_a_problem_whose_reference_fails_on_its_inputs_is_one_line_from_run(tmp_path):
    prob = tmp_path / "mismatch.py"
    prob.write_text(GOOD_PROBLEM.replace("return torch.relu(x)", "return x @ torch.randn(3, 3)"))
    cfg = _write_config(tmp_path, _file_problem_config(tmp_path, prob))
    one_error_line(invoke("run", cfg), f"problem {prob}", "the reference failed on its own inputs", "RuntimeError")


# -- damaged stores --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def known(tmp_path_factory) -> Path:
    return build_known_store(tmp_path_factory.mktemp("errlines") / "known.db")


def _damaged(known: Path, tmp: Path, how: str) -> Path:
    p = tmp / f"{how}.db"
    if how == "random":
        p.write_bytes(bytes(range(256)) * 80)
    elif how == "truncated":
        data = known.read_bytes()
        p.write_bytes(data[: len(data) // 2])
    elif how == "dropped":
        shutil.copy(known, p)
        con = sqlite3.connect(p)
        con.execute("DROP TABLE evaluation")
        con.commit()
        con.close()
    return p


STORE_DAMAGE = {"random": ("is not a SQLite file",),
                "truncated": ("is a damaged store", "truncated"),
                "dropped": ("is a damaged kernelsearch store", "table evaluation is missing")}


@pytest.mark.parametrize("how", list(STORE_DAMAGE))
def test_a_damaged_store_is_one_line_from_run_resume_and_the_views(known, tmp_path, how):
    db = _damaged(known, tmp_path, how)
    before = db.read_bytes()
    cfg = _write_config(tmp_path, _config(tmp_path, store=str(db)))
    for args in (("run", cfg), ("resume", "alpha", "--db", db), ("runs", "--db", db),
                 ("tree", "alpha", "--db", db)):
        line = one_error_line(invoke(*args), str(db), *STORE_DAMAGE[how])
        if how != "random":
            assert "not a kernelsearch store" not in line, line
    assert db.read_bytes() == before


def test_the_real_entry_point_prints_one_line_for_a_damaged_store(known, tmp_path):
    db = _damaged(known, tmp_path, "truncated")
    r = cli("resume", "alpha", "--db", str(db), cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "truncated" in r.stderr


# -- python -m kernelsearch.cli ------------------------------------------------------------------------------
@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_python_m_kernelsearch_cli_runs_the_cli_like_python_m_kernelsearch(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(ONLINE)
    outs = []
    for module in ("kernelsearch", "kernelsearch.cli"):
        r = subprocess.run([sys.executable, "-m", module, "eval", str(tmp_path / "nope.py"), str(cand)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        outs.append((r.returncode, r.stderr.strip()))
    assert outs[0] == outs[1] == (2, f"error: problem file not found: {tmp_path / 'nope.py'}"), outs


# -- the size cap ----------------------------------------------------------------------------------------------
def _huge() -> str:
    pad = "# " + "x" * 98 + "\n"
    return ONLINE + pad * (MAX_SOURCE_BYTES // len(pad) + 1)


def test_check_source_refuses_a_source_over_the_cap():
    big = _huge()
    with pytest.raises(CandidateFailure) as info:
        check_source(big)
    assert info.value.status == Status.rejected and info.value.stage == "static"
    assert info.value.reason == f"source is {len(big.encode())} bytes, over the 1 MB cap ({MAX_SOURCE_BYTES} bytes)"
    assert check_source(ONLINE) == "triton"   # an ordinary kernel passes
    with pytest.raises(CandidateFailure, match="bytes, not text"):
        check_source(ONLINE.encode())


def test_eval_refuses_a_candidate_over_the_cap_without_a_worker(tmp_path):
    cand = tmp_path / "big.py"
    cand.write_text(_huge())
    code, out, err = invoke("eval", "softmax", cand, "--json")
    assert code == 1, (out, err)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "rejected" and result["stage"] == "static"
    assert "over the 1 MB cap" in result["reason"]
    assert result.get("wall_s") is None   # no worker ran: refused before the pool


# -- two runs creating one new store at once -----------------------------------------------------------------
def test_two_runs_creating_the_same_new_store_at_once(tmp_path):
    db = tmp_path / "fresh" / "ks.db"
    cfg = _write_config(tmp_path, _config(tmp_path, store=str(db), name="same", budgets={"wall_time_s": 0.001}))
    procs = [subprocess.Popen([sys.executable, "-m", "kernelsearch", "run", str(cfg)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    for out, err in outs:
        assert "Traceback" not in out + err, out + err
    assert codes == [0, 2], outs
    loser = next(err for p, (out, err) in zip(procs, outs) if p.returncode == 2)
    assert loser.strip() == (f"error: a run named 'same' already exists in {db}; "
                             "`kernelsearch resume same` continues it"), loser
    e = open_store(db, readonly=True, verify=True)
    with Session(e) as s:
        runs = s.exec(select(Run)).all()
        assert [(r.name, r.status, r.stop_reason) for r in runs] == [("same", "finished", "budget_wall_time")]
    e.dispose()


# -- corrupt rows ------------------------------------------------------------------------------------------------
def _store_with_corrupt_rows(tmp: Path) -> Path:
    """Run "r" (softmax, offline): k1 the starter, ok; k2 queued, its code a blob; k3 queued, its code empty;
    k4 evaluated with a status outside the enum; k5 ok but its detail_json is not JSON."""
    db = tmp / "corrupt.db"
    data = _config(tmp, store=str(db), budgets={"evaluations": 5})
    engine = open_store(db)
    with Session(engine) as s:
        s.add(Run(id=1, name="r", problem="softmax", config_json=parse_config(data).model_dump_json(),
                  status="interrupted", device="cpu-interpreter"))
        s.flush()
        for kid in range(1, 6):
            s.add(Kernel(id=kid, run_id=1, code=ONLINE + f"# {kid}\n", code_hash=f"h{kid}", round=0))
        s.flush()
        s.add(Evaluation(kernel_id=1, status="ok", time_ms=1.0, ref_time_ms=1.0, speedup=1.0,
                         timing_kind="cpu-interpreter"))
        s.add(Evaluation(kernel_id=4, status="exploded", reason="?"))
        s.add(Evaluation(kernel_id=5, status="ok", time_ms=0.5, ref_time_ms=1.0, speedup=2.0,
                         timing_kind="cpu-interpreter"))
        s.commit()
    engine.dispose()
    con = sqlite3.connect(db)
    con.execute("UPDATE kernel SET code = ? WHERE id = 2", (b"\x00\xffbinary",))
    con.execute("UPDATE kernel SET code = '' WHERE id = 3")
    con.execute("UPDATE evaluation SET detail_json = '{\"cases\": [1, 2' WHERE kernel_id = 5")
    con.commit()
    con.close()
    return db


CORRUPT = ("k2: code is a blob, not text", "k3: code is empty", "k4: evaluation status 'exploded'",
           "k5: evaluation detail_json is not JSON")


def test_corrupt_rows_are_reported_by_the_views(tmp_path):
    db = _store_with_corrupt_rows(tmp_path)
    for args, n, wanted in ((("tree", "r"), 4, CORRUPT), (("runs",), 4, CORRUPT),
                            (("report", "r", "-o", tmp_path / "r.html"), 4, CORRUPT),
                            (("show", "5"), 1, CORRUPT[3:]), (("show", "2"), 1, CORRUPT[:1])):
        code, out, err = invoke(*args, "--db", db)
        assert code == 0, (args, out, err)
        warning = [ln for ln in err.splitlines() if ln.startswith("warning:")]
        assert len(warning) == 1 and f"{n} damaged row" in warning[0], (args, err)
        for w in wanted:
            assert w in warning[0], (w, warning[0])
    _, out, _ = invoke("show", "2", "--db", db)
    assert "# damaged store row: code is a blob of 8 bytes, not text" in out
    code, out, err = invoke("diff", "2", "3", "--db", db)
    assert code == 0 and "+# damaged store row: code is empty" in out, (out, err)
    assert "code is a blob of 8 bytes" in (tmp_path / "r.html").read_text()


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_resume_reports_corrupt_rows_and_does_not_retry_them(tmp_path):
    db = _store_with_corrupt_rows(tmp_path)
    code, out, err = invoke("resume", "r", "--db", db)
    assert code == 0, (out, err)
    assert "Traceback" not in out + err
    for w in CORRUPT:
        assert w in err, (w, err)
    assert "finished" in out and "budget_evaluations" in out
    e = open_store(db, readonly=True)
    with Session(e) as s:
        ev2 = s.exec(select(Evaluation).where(Evaluation.kernel_id == 2)).one()
        ev3 = s.exec(select(Evaluation).where(Evaluation.kernel_id == 3)).one()
        assert (ev2.status, ev2.stage) == ("compile_error", "static") and "not text" in ev2.reason
        assert (ev3.status, ev3.stage) == ("compile_error", "static") and "empty" in ev3.reason
        assert len(s.exec(select(Kernel)).all()) == 5   # nothing new was written
        queued = s.exec(select(Kernel.id).where(~Kernel.id.in_(select(Evaluation.kernel_id)))).all()
        assert queued == []   # a later resume has nothing of theirs to retry
    e.dispose()
