"""kernelsearch/model: Amdahl's law and the plan, and the whole-model check with kernels swapped in (in-process here
with plain-torch ModelNew fixtures; the pipeline runs the same code in a subprocess)."""
import os

import pytest

from kernelsearch.model.extract import Part, extract
from kernelsearch.model.plan import amdahl, amdahl_many, make_plan, plan_lines, possible_speedup
from kernelsearch.model.profile import load_model, model_inputs, profile
from kernelsearch.model.settings import PlanSettings
from kernelsearch.model.verify import report_lines, run_request

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA = os.path.join(HERE, "..", "..", "configs", "models", "llama_style.py")
CEIL = {"copy_gbps": 1000.0, "float32_tflops": 100.0}


def _part(key, share, time_ms, nbytes, kind="family"):
    family = kind == "family"
    return Part(key=key, kind=kind, family="softmax" if family else None,
                op="aten::softmax" if family else "aten::silu",
                params={"rows": 1, "cols": 1} if family else {"shapes": [[1]]}, dtype="float32", calls=1.0,
                time_ms=time_ms, share=share, flops=0.0, nbytes=nbytes)


def test_amdahl():
    assert amdahl(0.5, 2.0) == pytest.approx(4 / 3)
    assert amdahl(0.2, 1e12) == pytest.approx(1.25)
    assert amdahl_many([(0.5, 2.0), (0.25, 4.0)]) == pytest.approx(1 / (0.25 + 0.25 + 0.0625))


def test_possible_speedup_is_the_roofline_headroom_capped():
    # 1 MB at 1000 GB/s is 1 us; measured 10 us; a kernel reaching 80 % of the roofline takes 1.25 us: 8x
    s, now = possible_speedup(_part("a", 0.5, 0.010, 1e6), CEIL, PlanSettings(attainable=0.8))
    assert (s, now) == (pytest.approx(8.0), pytest.approx(0.1))
    assert possible_speedup(_part("a", 0.5, 0.010, 1e6), CEIL, PlanSettings(max_speedup=3))[0] == 3.0
    assert possible_speedup(_part("a", 0.5, 0.0005, 1e6), CEIL, PlanSettings())[0] == 1.0   # at the roofline


def test_plan_orders_by_gain_splits_budgets_and_stops_when_the_rest_cannot_pay():
    parts = [_part("small", 0.004, 0.010, 1e6), _part("big", 0.5, 0.010, 1e6), _part("mid", 0.3, 0.004, 1e6),
             _part("gen", 0.1, 0.010, 1e6, kind="generated")]
    plan = make_plan(parts, {"ceilings": CEIL, "total_ms": 1.0, "clock": "cuda"},
                     PlanSettings(attainable=1.0, min_gain=0.01, min_share=0.0),
                     {"evaluations": 30, "wall_time_s": 600.0},
                     lambda p: "needs an LLM" if p.kind == "generated" else None)
    assert [e.key for e in plan.entries] == ["big", "mid", "gen", "small"]
    big, mid, gen, small = plan.entries
    assert big.speedup == pytest.approx(10.0) and mid.speedup == pytest.approx(4.0)
    assert big.gain == pytest.approx(1 / (0.5 + 0.05) - 1)
    assert (big.selected, mid.selected, gen.selected, small.selected) == (True, True, False, False)
    assert gen.reason == "needs an LLM" and not gen.budget
    assert "plan.min_gain" in small.reason   # 0.4 % of the time, 10x: under 1 % for the model
    share = big.gain / (big.gain + mid.gain)
    assert big.budget == {"evaluations": round(30 * share), "wall_time_s": pytest.approx(600 * share)}
    assert big.budget["evaluations"] + mid.budget["evaluations"] == 30
    assert plan.predicted == pytest.approx(amdahl_many([(0.5, 10.0), (0.3, 4.0)]))
    text = "\n".join(plan_lines(plan))
    assert "not searched: needs an LLM" in text and "predicted model speedup" in text


def test_a_problem_whose_share_of_the_evaluations_is_under_the_floor_is_left_to_the_others():
    parts = [_part("big", 0.5, 0.010, 1e6), _part("mid", 0.3, 0.004, 1e6), _part("tail", 0.05, 0.010, 1e6)]
    profile = {"ceilings": CEIL, "total_ms": 1.0, "clock": "cuda"}
    settings = PlanSettings(attainable=1.0, min_gain=0.0, min_share=0.0, min_evaluations=4)
    plan = make_plan(parts, profile, settings, {"evaluations": 16}, lambda p: None)
    big, mid, tail = plan.entries
    assert tail.gain * 16 / (big.gain + mid.gain + tail.gain) < 4   # its proportional share would be under the floor
    assert (big.selected, mid.selected, tail.selected) == (True, True, False)
    assert "plan.min_evaluations 4" in tail.reason and not tail.budget
    assert big.budget["evaluations"] + mid.budget["evaluations"] == 16
    assert plan.predicted == pytest.approx(amdahl_many([(0.5, 10.0), (0.3, 4.0)]))
    # with the floor at 0 every problem keeps its share
    loose = make_plan(parts, profile, settings.model_copy(update={"min_evaluations": 0}), {"evaluations": 16},
                      lambda p: None)
    assert all(e.selected for e in loose.entries)


@pytest.fixture(scope="module")
def tiny():
    os.environ["KERNELSEARCH_MODEL_SIZE"] = "tiny"
    try:
        model, module = load_model(LLAMA, "cpu", 0)
        prof = profile(model, model_inputs(module, "cpu", 1), "cpu", iters=1)
    finally:
        os.environ.pop("KERNELSEARCH_MODEL_SIZE")
    return {p.key: p for p in extract(prof)}


def _winner(part, fixture, speedup=2.0):
    return {"key": part.key, "part": dict(part.__dict__), "kernel_file": os.path.join(HERE, "fixtures", fixture),
            "kernel_id": 1, "speedup": speedup, "share": part.share}


def test_verify_swaps_kernels_in_and_leaves_out_one_that_breaks_the_model(tiny, monkeypatch):
    monkeypatch.setenv("KERNELSEARCH_MODEL_SIZE", "tiny")
    norm, sm, mm = tiny["rmsnorm-32x64-float32"], tiny["softmax-128x16-float32"], tiny["matmul-32x64x64-float32"]
    req = {"model": LLAMA, "device": "cpu", "seed": 5, "iters": 1, "compile": False,
           "tolerance": {"float32": 1e-4}, "output_dtype": "float32",
           "winners": [_winner(norm, "rmsnorm_no_weight.py"), _winner(norm, "rmsnorm_good.py"),
                       _winner(sm, "softmax_no_max.py"), _winner(sm, "softmax_good.py"), _winner(mm, "raises.py")]}
    out = run_request(req)
    status = [(r["key"].split("-")[0], r["status"]) for r in out["problems"]]
    assert status == [("rmsnorm", "breaks_model"), ("rmsnorm", "ok"), ("softmax", "breaks_model"),
                      ("softmax", "ok"), ("matmul", "error")]
    bad_norm, good_norm, bad_sm, good_sm, raises = out["problems"]
    assert bad_norm["rel_error"] > 1e-2 and bad_sm["rel_error"] > 1e-2   # the swaps took effect
    assert good_norm["rel_error"] < 1e-5 and good_sm["rel_error"] < 1e-5
    assert "does not support this shape" in raises["reason"]
    assert out["rel_error"] < 1e-4   # the accepted kernels together
    assert out["eager_ms"] > 0 and out["kernels_ms"] > 0 and good_norm["measured"] > 0
    assert good_norm["predicted"] == pytest.approx(amdahl(norm.share, 2.0))
    text = "\n".join(report_lines(out))
    assert "LEFT OUT (breaks_model)" in text and "not GPU timings" in text
