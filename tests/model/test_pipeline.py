"""A model run through the CLI on the CPU: profile, plan, child runs (offline provider), verify; killed and resumed."""
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from kernelsearch.config import load_config
from kernelsearch.model.pipeline import start_model_run
from kernelsearch.store import open_store, session_scope
from kernelsearch.store.model_queries import run_named
from kernelsearch.views.model import build_model_report
from tests.helpers import cli

LLAMA = Path(__file__).resolve().parents[2] / "configs" / "models" / "llama_style.py"
ENV = {"KERNELSEARCH_MODEL_SIZE": "tiny"}


def _config(tmp_path: Path, **plan) -> Path:
    cfg = tmp_path / "model.yaml"
    plan = {"min_share": 0.0, "min_gain": 0.0, "min_evaluations": 0, **plan}
    plan_line = ", ".join(f"{k}: {v}" for k, v in plan.items())
    cfg.write_text(f"model: {LLAMA}\nstore: {tmp_path / 'm.db'}\ndevice: cpu\nllm: {{provider: offline}}\n"
                   "search: {rounds: 1, ideas_per_round: 1, branches_per_idea: 1, seeds_per_round: 1, concurrency: 2}\n"
                   "budgets: {evaluations: 4}\n"
                   "evaluation: {timeout_s: 120, trials: 1, aot_compile: false}\n"
                   f"plan: {{{plan_line}}}\nverify: {{iters: 1}}\n")
    return cfg


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_a_model_run_whose_plan_searches_nothing_profiles_plans_and_verifies(tmp_path, monkeypatch):
    """A threshold no problem can pass: the profile and the plan are printed and stored, no child run starts, the
    model is timed eager in the verify subprocess, and the run is finished."""
    cfg = _config(tmp_path, min_gain=100)
    console = Console(file=io.StringIO(), width=200)
    monkeypatch.setenv("KERNELSEARCH_MODEL_SIZE", "tiny")
    start_model_run(load_config(cfg), tmp_path / "m.db", "m0", console)
    out = console.file.getvalue()
    # the console shows the top 15 rows: softmax is near the 15th on the CPU and drops out on a slower machine
    assert "CPU time (labelled cpu: not GPU timings)" in out and "aten::linear" in out
    assert out.index("Amdahl plan") < out.index("verifying")
    assert "not searched: the problems from here on together could speed the model up by" in out
    assert "no kernel accepted" in out
    db = tmp_path / "m.db"
    assert _rows(db, "SELECT name, status, stop_reason FROM run") == [("m0", "finished", "verified")]
    (stage, plan, verify), = _rows(db, "SELECT stage, plan_json, verify_json FROM modelrun")
    assert stage == "done" and json.loads(verify)["eager_ms"] > 0
    keys = [k for k, in _rows(db, "SELECT key FROM modelproblem ORDER BY \"order\"")]
    assert keys == [e["key"] for e in json.loads(plan)["entries"]]
    assert "rmsnorm-32x64-float32" in keys and "softmax-128x16-float32" in keys
    assert (tmp_path / "m0.model" / "problems" / "matmul-2x4x16x16_2x4x16x16-float32.py").is_file()
    engine = open_store(db, readonly=True)
    with session_scope(engine) as s:   # the report's model page: the profile, the plan, the verify step
        page = build_model_report(s, run_named(s, "m0"))
    assert "aten::linear" in page and "Amdahl plan" in page and "rmsnorm-32x64-float32" in page
    assert "no kernel accepted" in page and "<svg" in page


@pytest.mark.slow
def test_a_model_run_searches_its_problems_and_verifies_the_model_with_the_winners(tmp_path):
    cfg = _config(tmp_path, max_problems=2)
    r = cli("run", str(cfg), "--name", "m1", cwd=tmp_path, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    db = tmp_path / "m.db"
    children = _rows(db, "SELECT child_run, child_run_id FROM modelproblem WHERE selected ORDER BY \"order\"")
    assert len(children) == 2 and all(cid is not None for _, cid in children)
    assert {s for _, s in _rows(db, "SELECT name, status FROM run WHERE name != 'm1'")} == {"finished"}
    verify = json.loads(_rows(db, "SELECT verify_json FROM modelrun")[0][0])
    assert len(verify["accepted"]) == 2 and verify["rel_error"] <= verify["tolerance"]
    assert "CPU, Triton interpreter: not GPU timings" in r.stdout
    r = cli("runs", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0 and "└" in r.stdout   # the children under their model run
    r = cli("export-tsv", "m1", "--db", str(db), cwd=tmp_path)
    kinds = {line.split("\t")[2] for line in r.stdout.splitlines()[1:]}
    # both children's rows, each under its run's problem (a family point `name@...`, or a problem file the model run
    # wrote: which two the plan picks moves with the offline provider's starting points)
    problems = {p for (p,) in _rows(db, "SELECT problem FROM run WHERE name != 'm1'")}
    assert r.returncode == 0 and len(kinds) == 2 and kinds == problems, (kinds, problems)
    r = cli("report", "m1", "--db", str(db), "-o", str(tmp_path / "m1.html"), cwd=tmp_path)
    page = (tmp_path / "m1.html").read_text()
    assert r.returncode == 0 and "model predicted" in page and "with kernels" in page


@pytest.mark.slow
@pytest.mark.timeout(600)   # 30 s here; CI once saw no evaluation in 300 s (the wait below now says what it printed)
def test_a_killed_model_run_resumes_without_redoing_its_plan_or_finished_children(tmp_path):
    cfg = _config(tmp_path, max_problems=2)
    db = tmp_path / "m.db"
    log = tmp_path / "run.log"   # a file, not a pipe nobody reads while waiting: what the run printed, if it hangs
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kernelsearch", "run", str(cfg), "--name", "mk"], cwd=tmp_path,
                                env={**os.environ, **ENV}, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:   # killed once the first child run has an evaluation
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and _rows(db, "SELECT count(*) FROM evaluation")[0][0] >= 1:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no evaluation within 420 s (exit {proc.poll()}); the run printed:\n{log.read_text()[-4000:]}")
    finally:
        proc.kill()
    proc.wait(timeout=30)
    plan = _rows(db, "SELECT plan_json FROM modelrun")[0][0]
    before = dict(_rows(db, "SELECT k.id, e.status FROM kernel k JOIN evaluation e ON e.kernel_id = k.id"))
    assert _rows(db, "SELECT status FROM run WHERE name = 'mk'") == [("running",)]
    r = cli("resume", "mk", "--db", str(db), cwd=tmp_path, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(the plan as stored when the model run began)" in r.stdout
    assert _rows(db, "SELECT plan_json FROM modelrun")[0][0] == plan
    after = dict(_rows(db, "SELECT k.id, e.status FROM kernel k JOIN evaluation e ON e.kernel_id = k.id"))
    assert all(after[k] == v for k, v in before.items())   # nothing evaluated is redone or lost
    assert _rows(db, "SELECT status, stop_reason FROM run WHERE name = 'mk'") == [("finished", "verified")]
    assert len(json.loads(_rows(db, "SELECT verify_json FROM modelrun")[0][0])["accepted"]) == 2


@pytest.mark.slow
def test_a_models_generated_elementwise_problems_are_searched_by_the_offline_provider(tmp_path, monkeypatch):
    """silu(x) * y + x in bf16: three generated problems (aten::silu, mul, add), each matched to the generated
    pointwise family, searched in a child run of its own with the offline provider, and swapped into the model."""
    from kernelsearch.model import pipeline

    real = pipeline.profile_subprocess

    def profiled(*args):   # CPU times say little of headroom: ceilings that leave every operator some
        prof = real(*args)
        prof["ceilings"] = {"copy_gbps": 1000.0}
        return prof

    monkeypatch.setattr(pipeline, "profile_subprocess", profiled)
    model = Path(__file__).resolve().parent / "fixtures" / "gated_mlp_elementwise.py"
    cfg = _config(tmp_path, max_problems=3)
    cfg.write_text(cfg.read_text().replace(f"model: {LLAMA}", f"model: {model}")
                   .replace("budgets: {evaluations: 4}", "budgets: {evaluations: 6}"))
    console = Console(file=io.StringIO(), width=200)
    start_model_run(load_config(cfg), tmp_path / "m.db", "el", console)
    out = console.file.getvalue()
    db = tmp_path / "m.db"
    keys = {"silu-64x256-bfloat16", "mul-64x256_64x256-bfloat16", "add-64x256_64x256-bfloat16"}
    rows = _rows(db, "SELECT key, selected, child_run_id FROM modelproblem")
    assert {k for k, _, _ in rows} == keys
    assert all(sel and cid is not None for _, sel, cid in rows), out
    assert "needs an LLM provider" not in out and "not searched" not in out
    correct = _rows(db, "SELECT r.name, count(*) FROM evaluation e JOIN kernel k ON e.kernel_id = k.id "
                        "JOIN run r ON k.run_id = r.id WHERE e.status = 'ok' GROUP BY r.name")
    assert {name.removeprefix("el.") for name, n in correct if n >= 1} == keys
    verify = json.loads(_rows(db, "SELECT verify_json FROM modelrun")[0][0])
    assert len(verify["accepted"]) == 3 and verify["rel_error"] <= verify["tolerance"]
