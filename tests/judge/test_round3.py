"""The judge against the third outside set (issue 29): one fixture per class in tests/fixtures/cheats/round3/, each
seen to pass the judge before its fix (figures in docs/anticheat.md). Torch reached through another module, getattr
passed as a value and ATen called from C++ are rejected by the static scan; a softmax without the max subtraction is
incorrect on the range cases; forged out-of-memory text and a killed judge are the candidate's crash, not the
harness's uncharged failure; an sm_90 compile child that dies, or leaves a daemon behind, fails. Honest controls
(a Triton softmax, a CUDA C++ softmax as models write it) stay ok.
"""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
import torch

from kernelsearch.judge.scan import scan_source
from kernelsearch.judge.scan.native import check_native
from kernelsearch.judge.scan.torch_paths import torch_alias
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import CandidateFailure
from kernelsearch.judge.variants import range_variants
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

ROUND3 = Path(__file__).resolve().parents[1] / "fixtures" / "cheats" / "round3"
PROBLEM = {"file": str(ROUND3 / "softmax_randn.py")}


def _scan(name: str) -> str | None:
    """The scan's reason for rejecting a fixture, or None where it passes."""
    try:
        scan_source((ROUND3 / f"{name}.py").read_text())
    except CandidateFailure as err:
        return err.reason
    return None


@pytest.mark.parametrize("name, check", [
    ("kernelsearch_reexport", "import check"),   # torch as an attribute of a module that imported it
    ("forged_oom", "import check"),              # the runner's class rewritten through its module
    ("getattr_reduce", "getattr check"),         # getattr handed to functools.reduce
    ("cpp_aten", "native-code check"),           # torch::softmax in a load_inline extension
])
def test_torch_reached_without_naming_it_is_rejected_by_the_scan(name, check):
    reason = _scan(name)
    assert reason is not None and reason.startswith(check), reason


@pytest.mark.parametrize("name", ["honest_softmax", "honest_cuda", "no_max_softmax", "forged_oom_count"])
def test_honest_code_and_the_attacks_the_scan_cannot_see_pass_it(name):
    assert _scan(name) is None


def _native(src: str) -> list[str]:
    return [what for _, what in check_native(ast.parse(src))]


@pytest.mark.parametrize("cxx, bad", [
    ("auto y = x.softmax(-1);", "tensor method .softmax"),
    ("return at::matmul(a, b);", "at::matmul"),
    ("return torch::nn::functional::softmax(x, opts);", "torch::nn::functional::softmax"),
    ("cublasSgemm(handle, ta, tb, m, n, k, &one, a, m, b, k, &zero, c, m);", "cublasSgemm"),
    ("#include <ATen/ops/softmax.h>\nint f();", "ATen/ops/"),
])
def test_cpp_that_computes_with_a_library_is_found(cxx, bad):
    found = _native(f'SRC = """#include <torch/extension.h>\n{cxx}\n"""\n')
    assert any(bad in f for f in found), found


def test_cpp_honest_host_code_passes_and_a_call_split_across_literals_is_found():
    honest = ('SRC = """#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) {\n'
              '  auto y = torch::empty_like(x); auto z = at::zeros({4}, x.options());\n'
              '  int n = x.size(0); float* p = x.data_ptr<float>(); auto s = at::cuda::getCurrentCUDAStream();\n'
              '  TORCH_CHECK(x.is_contiguous(), "x"); return y.view({-1}).contiguous();\n}"""\n')
    assert _native(honest) == []
    split = 'A = "#include <torch/extension.h>\\nauto y = torch::soft"\nB = "max(x, -1);"\n'
    assert any("torch::softmax" in f for f in _native(split)), _native(split)


def test_cpp_sources_must_be_text_the_judge_can_read():
    runtime = ("from torch.utils.cpp_extension import load_inline\nimport os\nSRC = open(os.environ['F']).read()\n"
               "m = load_inline(name='m', cpp_sources=SRC, functions=['f'])\n")
    assert any("built at run time" in f for f in _native(runtime))
    literal = ("from torch.utils.cpp_extension import load_inline\nN = 256\nSRC = f'int f() {{ return {N}; }}'\n"
               "m = load_inline(name='m', cpp_sources=[SRC], functions=['f'])\n")
    assert _native(literal) == []
    files = ("from torch.utils.cpp_extension import load\nm = load(name='m', sources=['k.cu'])\n")
    assert any("from files" in f for f in _native(files))


def test_torch_by_identity_resolves_only_what_is_torchs():
    assert torch_alias("os.path.join") is None and torch_alias("triton.cdiv") is None
    assert torch_alias("kernelsearch.judge.numerics.torch") is None   # not an importable root: the import check's


def test_range_variants_scale_shift_and_make_constant_rows_keeping_zeros():
    x = torch.randn(6, 9, dtype=torch.float64)
    x[0, 0] = 0.0
    idx = torch.arange(6)
    cases = {name: (inputs, why) for name, inputs, why in range_variants([x, idx], seed=3)}
    assert set(cases) == {"x10", "x100", "shift", "rows"}
    assert torch.equal(cases["x100"][0][0], x * 100) and cases["x100"][0][1] is idx   # integers untouched
    shifted = cases["shift"][0][0]
    assert shifted[0, 0] == 0 and float(shifted[1:].min()) > 20 * float(x.abs().max())
    rows = cases["rows"][0][0]
    assert rows[0, 0] == 0 and all(len(set(r[1:].tolist() if i == 0 else r.tolist())) == 1 for i, r in enumerate(rows))
    sym = torch.randn(5, 5)
    sym = sym + sym.T
    skipped = {n: w for n, i, w in range_variants([sym], seed=1) if i is None}
    assert set(skipped) == {"rows"} and "symmetric" in skipped["rows"]


def _evaluate(names: list[str], concurrency: int = 2, aot: bool = False) -> dict:
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=concurrency, evaluation=EvalSettings(
        trials=1, timeout_s=120, timing_iters=5, aot_compile=aot)))

    async def go():
        return await asyncio.gather(*(pool.evaluate((ROUND3 / f"{n}.py").read_text(), PROBLEM) for n in names))

    try:
        return dict(zip(names, asyncio.run(go())))
    finally:
        pool.close()


@pytest.fixture(scope="module")
def judged() -> dict:
    """The fixtures the scan lets through, through the real pool on the CPU interpreter."""
    out = _evaluate(["honest_softmax", "no_max_softmax", "forged_oom_count", "noop_launch"])
    out.update(_evaluate(["kill_judge"], concurrency=1))   # it SIGKILLs every sibling of its runner: alone
    out.update(_evaluate(["aot_dies", "unreaped_daemon", "honest_autotune", "forged_report"], aot=True))
    return out


def test_an_honest_kernel_is_ok_and_runs_every_range_case(judged):
    r = judged["honest_softmax"]
    assert r.status == "ok", r.reason
    ran = r.detail["range"]["cases"]
    assert set(ran) == {"x10", "x100", "shift", "rows"} and all(c["run"] and c["ok"] for c in ran.values()), ran


def test_a_softmax_without_the_max_subtraction_fails_a_range_case(judged):
    r = judged["no_max_softmax"]
    assert r.status == "incorrect" and r.reason.startswith("range case x"), r.reason


def test_out_of_memory_text_from_the_candidate_is_its_crash(judged):
    r = judged["forged_oom_count"]
    assert r.status == "crash" and "out of memory" in r.reason, (r.status, r.reason)


def test_a_judge_the_candidate_killed_is_its_crash(judged):
    r = judged["kill_judge"]
    assert r.status in ("crash", "incorrect"), (r.status, r.reason)   # incorrect where it could not signal the judge
    if r.status == "crash":
        assert "charged to the candidate" in r.reason, r.reason


def test_an_sm90_compile_child_that_dies_or_leaves_a_process_fails(judged):
    dies, daemon = judged["aot_dies"], judged["unreaped_daemon"]
    assert dies.status == "crash" and "died" in dies.reason and dies.stage == "compile_sm90", dies.reason
    assert daemon.status == "rejected" and daemon.reason.startswith("process check"), daemon.reason


def test_a_launch_that_touches_no_output_does_not_count(judged):
    """Fixture round3/noop_launch: the softmax in plain Python on x.tolist(), one empty Triton launch beside it (ok at
    0.07x on the CPU before, 7x the honest interpreted kernel)."""
    r = judged["noop_launch"]
    assert r.status == "rejected" and r.reason.startswith("kernel-launch check"), (r.status, r.reason)
    assert "never an argument" in r.reason, r.reason


def test_an_sm90_report_written_by_the_candidate_is_not_the_verdict(judged):
    """Fixture round3/forged_report writes a clean report and empty launch records from the compile child and exits;
    its kernel cannot compile for the GPU. The judge compiles the source's kernels itself (judge/aot_compile.py)."""
    r = judged["forged_report"]
    assert r.status == "compile_error" and r.stage == "compile_sm90", (r.status, r.reason)
    assert "_softmax_row_kernel" in r.reason, r.reason


def test_an_autotuned_kernel_runs_its_first_config_under_the_interpreter(judged):
    """@triton.autotune, in most model-written Triton, crashed under the interpreter ("0 active drivers")."""
    r = judged["honest_autotune"]
    assert r.status == "ok", r.reason
    assert r.detail["sm90"]["status"] == "ok", r.detail["sm90"]   # and compiles for the H200


class _Cand:
    def __init__(self, on_kill):
        self.killed = False
        self.on_kill = on_kill

    def kill(self):
        self.killed = True
        self.on_kill()


@pytest.mark.parametrize("busy_until, verdict", [
    (0, None),              # quiet at once
    (5, None),              # a kernel that was finishing: waited for, the reference then timed on a quiet device
    ("kill", "rejected"),   # busy until the candidate's processes die: its work
    ("never", "harness"),   # busy after they died: another process's
])
def test_the_quiet_device_check(monkeypatch, busy_until, verdict):
    """judge/quiet.quiet_device with the probe replaced by a device that is busy for a while (GPU figures: the
    probe reads 0.11 ms idle and 0.28-0.45 ms beside a spinning process on an H100; fixture spin_reference is
    rejected there)."""
    import kernelsearch.judge.quiet as quiet
    from kernelsearch.judge.status import HarnessFailure

    state = {"probes": 0, "killed": False}

    def probe():
        state["probes"] += 1
        busy = (busy_until == "never" or (busy_until == "kill" and not state["killed"])
                or (isinstance(busy_until, int) and state["probes"] <= 3 * busy_until))
        return 3.0 if busy else 0.11

    monkeypatch.setattr(quiet, "_probe_ms", probe)
    monkeypatch.setattr(quiet.time, "sleep", lambda s: None)
    talk = type("Talk", (), {})()
    talk.cand = _Cand(lambda: state.update(killed=True))
    if verdict is None:
        quiet.quiet_device(talk)
        assert not talk.cand.killed
    elif verdict == "rejected":
        with pytest.raises(CandidateFailure) as err:
            quiet.quiet_device(talk)
        assert err.value.status == "rejected" and err.value.reason.startswith("GPU check") and talk.cand.killed
    else:
        with pytest.raises(HarnessFailure):
            quiet.quiet_device(talk)


def test_in_a_re_timing_group_a_busy_device_kills_every_candidate_and_no_reference(monkeypatch):
    """A group's candidates (judge/group.py) are all frozen while any side's batch waits for a quiet device: one
    that left work running is killed with the others, the group fails, and the pool times each alone."""
    import kernelsearch.judge.quiet as quiet

    state = {"killed": 0}
    monkeypatch.setattr(quiet, "_probe_ms", lambda: 3.0 if state["killed"] < 2 else 0.11)
    monkeypatch.setattr(quiet.time, "sleep", lambda s: None)
    talk = type("Talk", (), {})()
    talk.cand = _Cand(lambda: state.update(killed=state["killed"] + 1))
    sides = {"candidate": talk.cand, "candidate#1": _Cand(lambda: state.update(killed=state["killed"] + 1)),
             "eager": _Cand(lambda: pytest.fail("a reference's runner was killed"))}
    with pytest.raises(CandidateFailure) as err:
        quiet.quiet_device(talk, sides)
    assert err.value.reason.startswith("GPU check") and sides["candidate"].killed and sides["candidate#1"].killed
    assert not sides["eager"].killed


@pytest.mark.parametrize("busy_for, waited", [(0, 0), (2, 2), (10**6, "all")])
def test_a_batch_start_waits_for_a_quiet_device_without_a_verdict(monkeypatch, busy_for, waited):
    """judge/quiet.settle_device (each batch's start, before its inputs are written): probes until the device is
    quiet, at most PROBE_TRIES times, and says how many read busy; a device busy throughout is waited for, then the
    batch goes on (the references' batches are still probed with a verdict)."""
    import kernelsearch.judge.quiet as quiet

    probes = {"n": 0}

    def probe():
        probes["n"] += 1
        return 3.0 if probes["n"] <= 3 * busy_for else 0.11

    slept = []
    monkeypatch.setattr(quiet, "_probe_ms", probe)
    monkeypatch.setattr(quiet.time, "sleep", slept.append)
    busy = quiet.settle_device()
    assert busy == (quiet.PROBE_TRIES if waited == "all" else waited)
    assert len(slept) == busy and all(s == 0.05 for s in slept)
