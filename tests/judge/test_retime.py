"""The pool's re-timing mode (EvalSettings.retime, search/finalists.py): a kernel judged correct before is checked on
the timed case once and timed; the other cases, the range, signed and stability checks and the sm_90 compile are not
run again. A wrong kernel is still caught (the timed case's check, and the clock checks every timed output)."""
from __future__ import annotations

from pathlib import Path

from kernelsearch.families import load_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings

ROUND3 = Path(__file__).parents[1] / "fixtures" / "cheats" / "round3"


def test_a_retiming_checks_the_timed_case_and_times_it():
    problem = load_problem(str(ROUND3 / "softmax_randn.py"))
    source = (ROUND3 / "honest_softmax.py").read_text()
    r = evaluate(problem, source, EvalSettings(trials=1, timing_iters=3, retime=True), mode="cpu")
    assert r.status.value == "ok", r.reason
    checked = [c["case"] for c in r.detail["cases"]]
    assert checked == [problem.cpu_timed_case().describe()], checked
    assert not {"range", "signed", "sm90"} & set(r.detail) and "compile_sm90" not in r.detail["stage_s"]
    assert r.time_ms and r.time_ms > 0


def test_a_retiming_still_fails_a_wrong_kernel():
    problem = load_problem(str(ROUND3 / "softmax_randn.py"))
    wrong = (ROUND3 / "honest_softmax.py").read_text().replace("y = e / tl.sum(e, axis=0)",
                                                               "y = e / (tl.sum(e, axis=0) + 1.0)")
    assert "+ 1.0" in wrong
    r = evaluate(problem, wrong, EvalSettings(trials=1, timing_iters=3, retime=True), mode="cpu")
    assert r.status.value == "incorrect", (r.status, r.reason)
