"""Outputs described once (judge/clock.py): where every side replays a CUDA graph, the judge keeps the priming batch's
describe of the outputs and reads each timed call's values there against that batch's fresh inputs. The attack on it
(tests/fixtures/cheats/frozen_replay.py): a kernel that computes in every eager call and in its graph's first replay,
and touches nothing from the second replay on, so the priming batch's outputs are right and every timed batch is free.
On the CPU (no graph) the same source is an honest softmax: the control that its verdict on a GPU comes from the
replays alone."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelsearch.families import softmax
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_problem
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import Status

CHEAT = (Path(__file__).resolve().parents[1] / "fixtures" / "cheats" / "frozen_replay.py").read_text()
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: the attack lives in CUDA graph replays, "
                         "which the CPU interpreter does not have")


def test_the_cheat_differs_from_the_starter_only_by_its_call_count():
    body = softmax.STARTER.split("\n", 1)[1]
    assert "tl.where(tl.load(c_ptr) > armed, 0, n_rows)" in CHEAT and "_tick[(1,)]" in CHEAT
    assert "_tick" not in body and body.count("def ") == CHEAT.count("def ") - 1


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the CPU control needs Triton's interpreter "
                    "(set by the conftest where there is no GPU); on a GPU machine the GPU test below runs")
def test_on_the_cpu_every_call_is_eager_and_the_cheat_is_an_honest_softmax():
    result = evaluate(load_problem("softmax"), CHEAT, EvalSettings(trials=1, timing_iters=5), mode="cpu")
    assert result.status == Status.ok, result.reason


@gpu
def test_a_kernel_that_freezes_after_its_first_replay_is_incorrect():
    problem = load_problem("softmax")
    honest = evaluate(problem, softmax.STARTER, EvalSettings(), mode="cuda")
    cheat = evaluate(problem, CHEAT, EvalSettings(), mode="cuda")
    assert honest.status == Status.ok, honest.reason
    assert honest.detail["timing_plan"]["described_once"] is True
    # the cheat was captured (timed eagerly, it would be honest) and its frozen replays were read against fresh inputs
    assert (cheat.status, cheat.stage) == (Status.incorrect, "timing"), (cheat.reason, cheat.time_ms, honest.time_ms)
    assert "a timed call's output" in (cheat.reason or ""), cheat.reason
