"""The runner's compile-only mode (its `warm` op): Triton kernels are not launched, an autotuned one stops it, and
launches are counted again once it is off. Under the interpreter here; on a GPU the kernels are compiled."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernelsearch.judge.anticheat import LaunchCounter


@triton.jit
def _fill(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _fill_tuned(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


@pytest.fixture
def counter():
    c = LaunchCounter()
    c.install()
    return c


def test_compile_only_launches_nothing_and_counts_nothing(counter):
    out = torch.zeros(40)
    counter.compile_only = True
    _fill[(3,)](out, 40, BLOCK=16)
    assert out.sum().item() == 0.0
    assert counter.launches(__name__) == 0
    counter.compile_only = False
    _fill[(3,)](out, 40, BLOCK=16)
    assert out.sum().item() == 40.0
    assert counter.launches(__name__) == 1


def test_an_autotuned_kernel_stops_the_warm_up(counter):
    out = torch.zeros(40)
    counter.compile_only = True
    with pytest.raises(LaunchCounter.Autotuned):
        _fill_tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](out, 40)
    assert out.sum().item() == 0.0
    counter.compile_only = False   # off again: the autotuner runs as it would
    try:
        _fill_tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](out, 40)
    except LaunchCounter.Autotuned:
        pytest.fail("the autotuner still refuses with compile-only mode off")
    except RuntimeError as err:   # the interpreter without a GPU cannot time the configs
        assert "driver" in str(err)


@pytest.mark.parametrize("hold_mb", [64, 0])
def test_the_judges_own_device_work_for_the_warm_up_is_under_a_shared_lease(tmp_path, monkeypatch, hold_mb,
                                                                             recorded):
    """Judge._warm (GPU only in an evaluation; called here directly on the CPU): the models and inputs it hands the
    candidate (weights moved, inputs drawn and written: the judge's GPU work) under a shared lease, and the warm-up
    itself (the candidate's compiles, seconds) under none. Each case in a slot of its own with its model; small
    cases' models and inputs made in one hold (HOLD_BYTES), or a hold a case where it is 0."""
    from kernelsearch.families import load_problem
    from kernelsearch.families.softmax import STARTER
    from kernelsearch.judge import harness
    from kernelsearch.judge.harness import Judge
    from kernelsearch.judge.settings import EvalSettings

    monkeypatch.setattr(harness, "HOLD_BYTES", hold_mb * 2**20)
    log: list[tuple[str, tuple]] = []
    lasts: list = []
    slots: list = []

    def on_request(header, held):
        log.append((header.get("op"), held))
        slots.append((header.get("op"), header.get("warm_slot", header.get("slot"))))
        if header.get("op") == "warm":   # the GPU's reply (a CPU runner has no Triton to compile: warm false)
            lasts.append(header.get("last"))
            return {"warm": True, "kernels": 2, "failed": 0, "wait_s": 0.25}
        return None

    recorded.on_request = on_request
    spawn, lease, holds = recorded.spawn, recorded.lease, recorded.holds
    problem = load_problem("softmax")
    path = tmp_path / "candidate.py"
    path.write_text(STARTER)
    judge = Judge(problem, STARTER, EvalSettings(), mode="cpu", seed=1, spawn=spawn, lease=lease,
                  candidate_path=str(path))
    try:
        judge.compile()
        log.clear()
        slots.clear()
        holds.clear()
        judge._warm(problem.cases_for("cpu")[:2])
        warm = judge.detail["warm"]
    finally:
        judge.close()
    ops = {op: leases for op, leases in log}
    assert ops["build"] == ("shared",) and ops["inputs"] == ("shared",), log
    assert ops["warm"] == (), log
    # one warm a case, the last one marked: the runner waits for every case's compiles there, not after each case
    assert lasts == [False, True], lasts
    assert (warm["kernels"], warm["wait_s"], warm["stopped"]) == (2, 0.25, None), warm   # the last reply's
    # case i's model and inputs in slot i, its warm on slot i; both cases' made in one hold unless HOLD_BYTES is 0
    if hold_mb:
        assert slots == [("build", 0), ("inputs", 0), ("build", 1), ("inputs", 1), ("warm", 0), ("warm", 1)], slots
        assert holds == ["shared"], holds
    else:
        assert slots == [("build", 0), ("inputs", 0), ("warm", 0), ("build", 1), ("inputs", 1), ("warm", 1)], slots
        assert holds == ["shared", "shared"], holds


def test_a_warm_up_left_open_is_finished_before_any_other_op(monkeypatch):
    """The runner's compile threads (op_warm, GPU) stay open across the judge's build, inputs and warm requests of
    the next case; any other request (a call, a batch, a describe) first waits for them and ends them, so none of
    the warm-up's work runs beside a call. Triton's AsyncCompileMode with one compile submitted by hand (the GPU
    submits them from the forward's launches)."""
    import socket
    import threading
    import time

    from kernelsearch.judge import runner, wire

    monkeypatch.setattr(runner, "WARM_THREADS", 2)
    judge_end, runner_end = socket.socketpair()
    r = runner.Runner(runner_end)
    r._compiles_open()
    assert r.compiling is not None
    finished = threading.Event()

    def slow_compile():
        time.sleep(0.5)
        finished.set()
        return "kernel"

    r.compiling[1].submit("k", slow_compile, lambda kernel: None)
    seen = {}

    def judge():
        wire.send(judge_end, {"op": "ping"}, [])
        wire.recv(judge_end)
        seen["after_ping"] = (r.compiling is not None, finished.is_set())
        wire.send(judge_end, {"op": "describe"}, [])
        wire.recv(judge_end)
        seen["after_describe"] = (r.compiling is not None, finished.is_set())
        wire.send(judge_end, {"op": "exit"}, [])
        wire.recv(judge_end)

    t = threading.Thread(target=judge)
    t.start()
    r.serve()   # here, in the thread that entered the compile mode (Triton keeps it in a context variable)
    t.join(10)
    assert seen["after_ping"] == (True, False), seen
    assert seen["after_describe"] == (False, True), seen


def test_one_warm_thread_compiles_each_at_once_in_the_runners_own_thread(monkeypatch):
    """KS_CLOCK_WARM_THREADS=1 (the default): each compile runs when the forward submits it, in the runner's thread
    (no thread beside it), and is still counted and closed like the threads' (its launcher built too, on a GPU)."""
    import threading

    from kernelsearch.judge import runner

    monkeypatch.setattr(runner, "WARM_THREADS", 1)
    r = runner.Runner(None)
    r._compiles_open()
    ran = []
    try:
        r.compiling[1].submit("k", lambda: ran.append(threading.current_thread()) or "kernel", lambda kernel: None)
        r.compiling[1].submit("bad", lambda: 1 / 0, lambda kernel: None)
        assert ran == [threading.current_thread()], ran   # at submit, here
    finally:
        kernels, failed, _ = r._compiles_close()
    assert (kernels, failed, r.compiling) == (2, 1, None)
