"""A batch of `kernelsearch bench` in the views: `compare A B` of two batches problem by problem and `report` of a
batch, read from a store made here by hand (runs named as bench names them), with fast_p checked exactly."""
from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Kernel, Run


def _store(tmp_path: Path) -> Path:
    """Batch A: 1_relu correct at 2.0x (1.5x over torch.compile), 2_sum correct at 0.9x, 3_norm not correct.
    Batch B (allow_torch: matmul): 1_relu at 3.0x, 2_sum at 1.6x calling matmul, 3_norm at 1.2x. A run named
    like a batch of its own (`A-x-1_relu`) and a plain run must not be taken for A's."""
    path = tmp_path / "ks.db"
    engine = open_store(path)
    plan = {
        "A": [("1_relu", 2.0, 1.5, ""), ("2_sum", 0.9, None, ""), ("3_norm", None, None, None)],
        "B": [("1_relu", 3.0, None, ""), ("2_sum", 1.6, None, "matmul"), ("3_norm", 1.2, None, "")],
        "A-x": [("1_relu", 9.0, None, "")],
    }
    with Session(engine) as s:
        for batch, problems in plan.items():
            allow = ["matmul"] if batch == "B" else []
            for stem, sp, spc, ops in problems:
                run = Run(name=f"{batch}-{stem}", problem=f"/kb/level1/{stem}.py", status="finished",
                          config_json=json.dumps({"evaluation": {"allow_torch": allow}}))
                s.add(run)
                s.flush()
                k = Kernel(run_id=run.id, code="# k", code_hash=f"{batch}{stem}")
                s.add(k)
                s.flush()
                s.add(Evaluation(kernel_id=k.id, status="ok" if sp else "incorrect", speedup=sp,
                                 speedup_compile=spc, time_ms=1.0 if sp else None, ref_time_ms=sp,
                                 compile_ref_time_ms=spc, torch_ops=ops, timing_kind="judge-wall-clock"))
        s.add(Run(name="softmax-1", problem="softmax", config_json="{}"))
        s.commit()
    engine.dispose()
    return path


def _invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return res.exit_code, res.stdout, res.stderr


def test_compare_two_batches_problem_by_problem(tmp_path):
    db = _store(tmp_path)
    code, out, err = _invoke("compare", "A", "B", "--db", db)
    assert code == 0, err
    lines = out.splitlines()
    relu = next(ln for ln in lines if "1_relu" in ln)
    assert "2.00×" in relu and "3.00×" in relu and relu.rstrip(" │").endswith("1.50×")
    norm = next(ln for ln in lines if "3_norm" in ln)
    assert norm.split("│")[2].strip() == "no" and "1.20×" in norm
    assert "A A: fast_p over eager (3 problems): fast_0 0.667, fast_1 0.333, fast_1.5 0.333, fast_2 0.000" in out
    assert "B B: fast_p over eager (3 problems): fast_0 1.000, fast_1 1.000, fast_1.5 0.667, fast_2 0.333" in out
    assert "A A: fast_p over torch.compile (1 of 3 problems measured" in out
    assert "B B: allow_torch: matmul; the best kernels of 1 of 3 problems call torch for part of the work (matmul)" \
        in out
    assert "3 problems in both: B is faster on 2, slower on 0 (both correct); correct in A only: 0, in B only: 1" \
        in out
    assert "not comparable" in out   # different allowances
    assert "9.00×" not in out   # A-x's run is not A's


def test_compare_a_batch_with_a_name_that_is_none_is_one_line(tmp_path):
    db = _store(tmp_path)
    code, out, err = _invoke("compare", "A", "nope", "--db", db)
    assert code == 2 and err.strip() == f"error: 'A' is a batch, but 'nope' is no batch in {db}: compare two runs " \
        "or two batches"


def test_report_of_a_batch(tmp_path):
    db = _store(tmp_path)
    page = tmp_path / "a.html"
    code, out, err = _invoke("report", "A", "--db", db, "-o", page)
    assert code == 0, err
    text = page.read_text()
    assert "batch A" in text and "3 problems, 2 with a correct kernel" in text
    assert "<tr><td class=l>1</td><td>0.333</td><td>0.333</td></tr>" in text   # fast_1: eager, torch.compile
    assert "<tr><td class=l>0</td><td>0.667</td><td>0.667</td></tr>" in text
    assert "<tr><td class=l>1.5</td><td>0.333</td><td>0.000</td></tr>" in text   # 1.5x is not > 1.5
    assert "<tr><td class=l>2</td><td>0.000</td><td>0.000</td></tr>" in text
    assert text.count("<tr><td class=l>") == 4 + 3   # four p's, three problems (not A-x's)
    assert "allow_torch: none (strict" in text
    code, _, _ = _invoke("report", "A-1_relu", "--db", db, "-o", tmp_path / "run.html")   # a run keeps its page
    assert code == 0 and "Idea tree" in (tmp_path / "run.html").read_text()
