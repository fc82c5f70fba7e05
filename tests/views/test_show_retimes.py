"""`show` on a finalist's re-timings: each says whether it was timed side by side with other finalists in one timing
stage (judge/group.py) or alone."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.store import Evaluation, Run, open_store, session_scope
from kernelsearch.store import queries as q


def test_show_says_how_each_re_timing_was_timed(tmp_path):
    db = tmp_path / "r.db"
    engine = open_store(db)
    with session_scope(engine) as s:
        run = Run(name="r", problem="softmax", config_json="{}", device="cpu-interpreter")
        s.add(run)
        s.flush()
        kid = q.add_kernel(s, run.id, code="# k", code_hash="h", language="triton")
        common = {"kernel_id": kid, "status": "ok", "stage": "timing", "timing_kind": "cpu-interpreter",
                  "device": "cpu-interpreter"}
        q.add_evaluation(s, Evaluation(**common, time_ms=1.0, ref_time_ms=2.0, speedup=2.0,
                                       detail_json=json.dumps({"timing_group": 3})))   # a first evaluation in a group
        for t, detail in ((1.1, {"retime_group": 3}), (0.9, {}), (1.2, {"retime_group": 2})):
            q.add_evaluation(s, Evaluation(**common, time_ms=t, ref_time_ms=2.0, speedup=2.0 / t, purpose="retime",
                                           detail_json=json.dumps(detail)))
    res = CliRunner().invoke(app, ["show", str(kid), "--db", str(db)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if "re-timing " in ln]
    assert len(rows) == 3, res.output
    assert "side by side with 2 other finalists in one timing stage" in rows[0]
    assert "timed alone" in rows[1]
    assert "side by side with 1 other finalist in one timing stage" in rows[2]
    first = [ln for ln in res.output.splitlines() if "its evaluation" in ln]
    assert len(first) == 1 and "side by side with 2 other kernels in one timing stage" in first[0], res.output
