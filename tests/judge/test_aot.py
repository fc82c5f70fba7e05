"""Ahead-of-time Triton compile for sm_90 on a machine without a GPU (judge/aot.py).

The test process runs Triton in interpreter mode (conftest), so `aot_report` does its work in a child process,
which is the path the CPU worker takes too. Each call costs about 3 s (imports, input build, one compile).
"""
from __future__ import annotations

import pytest

from kernelsearch.families import load_problem
from kernelsearch.judge.aot import AOTError, aot_report, aot_report_inprocess


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def _starter():
    # the online kernel (the softmax starter until 2026-12-03), whose name and constexprs are asserted below
    from tests.helpers import ONLINE

    return ONLINE


def test_starter_compiles_for_sm90_and_reports_resources(softmax):
    r = aot_report(_starter(), softmax, "odd-bf16")
    assert r["status"] == "ok", r
    assert r["arch"] == "sm_90" and r["case"] == "odd-bf16" and r["launches"] == 1
    (k,) = r["kernels"]
    assert k["name"] == "_softmax_online_kernel"
    assert k["signature"]["x_ptr"] == "*bf16" and k["signature"]["n_cols"] == "i32"
    assert k["constexprs"] == {"BLOCK": 2048, "PERSISTENT": False}
    assert k["num_warps"] == 8
    assert 16 <= k["registers"] <= 255
    assert k["spills_bytes"] is not None and k["spills_bytes"] >= 0
    assert k["shared_bytes"] >= 0


def test_variant_specialises_on_the_case(softmax):
    from kernelsearch.families.softmax import SPACE

    src = SPACE.render({**SPACE.default, "variant": "single", "ROWS": 2, "num_warps": 4})
    r = aot_report(src, softmax, "mid")
    assert r["status"] == "ok", r
    (k,) = r["kernels"]
    assert k["name"] == "_softmax_rows_kernel"
    assert k["constexprs"]["BLOCK"] == 1024 and k["constexprs"]["ROWS"] == 2   # next_power_of_2(1000)
    assert k["signature"]["x_ptr"] == "*fp32" and k["num_warps"] == 4


def test_mismatched_dot_is_a_compile_error_with_the_message(softmax):
    bad = _starter().replace(
        "        m_row = tl.max(m, axis=0)",
        "        m_row = tl.max(m, axis=0)\n"
        "        _w = tl.dot(tl.zeros([16, 32], tl.float32), tl.zeros([16, 32], tl.float32))")
    assert bad != _starter()
    r = aot_report(bad, softmax, "mid")
    assert r["status"] == "compile_error", r
    assert "reduction dimensions" in r["error"]
    assert r["kernels"][0]["status"] == "compile_error"


def test_undefined_language_op_is_a_compile_error(softmax):
    bad = _starter().replace("m_row = tl.max(m, axis=0)", "m_row = tl.no_such_op(m, axis=0)")
    r = aot_report(bad, softmax, "mid")
    assert r["status"] == "compile_error", r
    assert "no_such_op" in r["error"]


def test_a_candidate_without_triton_kernels_is_reported(softmax):
    src = ("import torch\n\nclass ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n        return torch.softmax(x, -1)\n")
    r = aot_report(src, softmax, "mid")
    assert r["status"] == "error" and "launched no @triton.jit kernel" in r["error"]


def test_in_process_refuses_interpreter_mode(softmax):
    with pytest.raises(AOTError, match="TRITON_INTERPRET"):
        aot_report_inprocess(_starter(), softmax, "mid")


def test_unknown_case_is_an_aot_error(softmax):
    with pytest.raises(AOTError, match="no case"):
        aot_report(_starter(), softmax, "nope")


_COPY = '''import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, GATHER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = (offs * 7) % n if GATHER else offs   # a gather cannot be one vector load
    tl.store(y_ptr + offs, tl.load(x_ptr + src, mask=offs < n), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), GATHER=$GATHER, BLOCK=1024, num_warps=4)
        return y
'''


def test_memory_ops_tell_a_vectorised_load_from_a_gather(softmax):
    # an fp32 copy of 64000 elements (divisible by 16, so the mask is known aligned): 1024 elements over 128
    # threads, 8 a thread, two 16-byte vectors. (At odd-bf16's 5000 elements even the plain copy compiles to
    # single-element loads: Triton specialises lengths on divisibility by 16 only.)
    from string import Template

    (plain,) = aot_report(Template(_COPY).substitute(GATHER=False), softmax, "mid")["kernels"]
    assert plain["memory_ops"] == {"ld.global.v4.b32": 2, "st.global.v4.b32": 2}, plain
    (gather,) = aot_report(Template(_COPY).substitute(GATHER=True), softmax, "mid")["kernels"]
    assert gather["memory_ops"].get("ld.global.b32", 0) == 8, gather   # one element per load
    assert gather["memory_ops"]["st.global.v4.b32"] == 2


def test_the_kernels_are_read_from_the_source_text_and_nothing_else_of_it_runs():
    """judge/aot_compile.py: the compile takes the candidate's kernels from its text, cut down to imports of triton
    and math, literal constants and the kernels' defs; host code, other imports and calls at module level are gone."""
    from kernelsearch.judge.aot_compile import kernel_module_source

    src = '''import math, os
import triton
import triton.language as tl
from triton import jit as J
os.system("touch /tmp/pwned")
LOG2E = math.log2(math.e)
SCALE: tl.constexpr = tl.constexpr(2 * 64)
WHO = os.getpid()

def helper(x):
    return x

@triton.autotune(configs=[triton.Config({"B": 64})], key=["n"])
@triton.jit
def k1(x_ptr, n, B: tl.constexpr = WHO):
    pass

@J
def k2(x_ptr, n: os.getpid()):
    pass

def _k3(x_ptr):
    pass

k3 = triton.jit(_k3)

def host(x):
    k1[(1,)](x, 1)
    k3[(1,)](x)
'''
    text, kernels, launched = kernel_module_source(src)
    assert kernels == {"k1", "k2", "k3"} and launched == {"k1", "k3"}
    assert "os" not in text.replace("constexpr", "").split() and "system" not in text and "getpid" not in text
    assert "helper" not in text and "def host" not in text and "autotune" not in text
    assert "LOG2E = math.log2(math.e)" in text and "SCALE = tl.constexpr(2 * 64)" in text
    assert "B: tl.constexpr=None" in text     # a default that is not a literal is dropped, not evaluated
    assert text.count("@_ks_jit") == 2 and "k3 = _ks_jit(_k3)" in text
    options = kernel_module_source("import triton\n\n@triton.jit(noinline=True, launch_metadata=print)\n"
                                   "def f(x):\n    pass\n")[0]
    assert "@_ks_functools.partial(_ks_jit, noinline=True)" in options and "print" not in options


def test_a_kernel_that_cannot_compile_is_a_compile_error_whoever_writes_the_report(softmax):
    """Fixture round3/forged_report: the candidate's process writes a clean report (and empty launch records) and
    exits. The verdict is the judge's compile of the source's kernels: the one its runner launched is unrecorded,
    which fails; and recorded honestly (the same kernel without the forgery), it does not compile (it calls a plain
    Python function)."""
    from pathlib import Path

    src = (Path(__file__).parents[1] / "fixtures/cheats/round3/forged_report.py").read_text()
    r = aot_report(src, softmax, "mid", required={"_softmax_row_kernel"})   # as the judge's runner saw it launched
    assert r["status"] == "compile_error" and r["missing"] == ["_softmax_row_kernel"], r
    assert aot_report(src, softmax, "mid")["status"] != "ok"   # with the records' word alone: no kernel, no pass
    # the same forgery with an error in its records instead (an "error" report passed the judge's sm_90 stage)
    says_error = src.replace('"error": null', '"error": "ImportError: no module"')
    assert says_error != src
    r = aot_report(says_error, softmax, "mid", required={"_softmax_row_kernel"})
    assert r["status"] == "compile_error" and r["missing"] == ["_softmax_row_kernel"], r
    honest_record = src.replace('if os.environ.get("TRITON_INTERPRET") != "1":', "if False:")
    r = aot_report(honest_record, softmax, "mid")
    assert r["status"] == "compile_error" and "_scale" in r["error"], r


def test_loading_the_kernels_leaves_no_folder_behind(tmp_path, monkeypatch):
    """load_kernels writes the cut-down source to a file for @jit to read: the folder goes once they are made
    (one was left in /tmp by every sm_90 compile: 279 in a day of this machine's tests)."""
    import tempfile

    from kernelsearch.judge.aot_compile import load_kernels

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kernels, launched = load_kernels(_starter())
    assert "_softmax_online_kernel" in kernels and kernels["_softmax_online_kernel"].src
    assert list(tmp_path.iterdir()) == []
