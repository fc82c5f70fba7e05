"""judge/cuda_check.py: CUDA C++ candidates compiled for sm_90a where no GPU is, with registers, spills and shared
memory per kernel; a compile error with nvcc's first lines; one compile shared by candidates whose extensions are the
same; and the verdict `unverified` (nothing ran), never a pass."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelsearch.judge import cuda_check
from kernelsearch.judge.cuda_check import Unreadable, cuda_report, extensions, find_nvcc, judge_without_gpu
from kernelsearch.judge.status import CandidateFailure, Status

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SMALL = (FIX / "cuda" / "small_kernel.py").read_text()
HONEST = (FIX / "cheats" / "round3" / "honest_cuda.py").read_text()
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc on this machine: the sm_90a compile check skips")


def test_sources_read_as_load_inline_writes_them():
    """f-strings over module constants, a call inside a function, the implicit headers and the pybind module."""
    (ext,) = extensions(HONEST)
    assert ext.name == "ks_round3_honest_cuda"
    assert ext.cuda.startswith("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n")
    assert "__shared__ float red[256];" in ext.cuda and "{BLOCK}" not in ext.cuda   # the f-string evaluated
    assert ext.cpp.startswith("#include <torch/extension.h>\ntorch::Tensor softmax_cuda(torch::Tensor x);")
    assert 'm.def("softmax_cuda", torch::wrap_pybind_function(softmax_cuda), "softmax_cuda");' in ext.cpp
    (small,) = extensions(SMALL)
    assert "torch/" not in small.cuda + small.cpp and "* 2.0f" in small.cuda   # no_implicit_headers, SCALE = 2


def test_a_source_built_at_run_time_is_unreadable():
    src = SMALL.replace("cuda_sources=KERNEL", "cuda_sources=open('k.cu').read()")
    with pytest.raises(Unreadable, match="open"):
        extensions(src)
    assert cuda_report(src)["status"] == "error"


def test_an_include_outside_the_include_folders_is_refused_before_any_compile():
    src = SMALL.replace("__global__ void", '#include "/etc/passwd"\n__global__ void', 1)
    report = cuda_report(src)
    assert report["status"] == "compile_error" and "/etc/passwd" in report["error"]


def test_ptxas_report_per_kernel():
    text = ("ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'\n"
            "ptxas info    : Function properties for _Z1kPf\n"
            "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]\n"
            "ptxas info    : Compiling entry function '_Z1jv' for 'sm_90a'\n"
            "ptxas info    : Used 6 registers, 352 bytes cmem[0]\n")
    k, j = cuda_check.ptxas_kernels(text)
    got = (k["registers"], k["spills_bytes"], k["stack_bytes"], k["shared_bytes"], k["barriers"])
    assert got == (40, 16, 8, 2048, 1)
    assert (j["mangled"], j["registers"], j["shared_bytes"]) == ("_Z1jv", 6, 0)


@needs_nvcc
def test_compiles_for_sm90a_with_registers_and_a_python_only_change_is_not_rebuilt(tmp_path):
    report = cuda_report(SMALL, cache=tmp_path)
    assert report["status"] == "ok", report
    (k,) = report["kernels"]
    assert k["arch"] == "sm_90a" and k["name"].startswith("scale_kernel(")
    assert k["registers"] > 0 and k["spills_bytes"] == 0 and k["shared_bytes"] == 256 * 4
    assert report["extensions"][0]["cached"] is False
    # the same extension under other Python: read from the shared cache, nvcc not run again
    other = SMALL.replace("return _ext().scale(x)", "y = _ext().scale(x)\n        return y")
    assert other != SMALL
    again = cuda_report(other, cache=tmp_path)
    assert again["extensions"][0]["cached"] is True and again["kernels"] == report["kernels"]
    # a change to the CUDA source is compiled afresh
    changed = cuda_report(SMALL.replace("SCALE = 2", "SCALE = 3"), cache=tmp_path)
    assert changed["extensions"][0]["cached"] is False and changed["status"] == "ok"


@needs_nvcc
def test_an_undefined_symbol_is_a_compile_error_with_nvccs_message(tmp_path):
    src = SMALL.replace("y[i] = tile[threadIdx.x]", "y[i] = no_such_helper(tile[threadIdx.x])")
    report = cuda_report(src, cache=tmp_path)
    assert report["status"] == "compile_error"
    assert re.search(r'cuda\.cu\(\d+\): error: identifier "no_such_helper" is undefined', report["error"]), report
    detail: dict = {}
    with pytest.raises(CandidateFailure) as err:
        judge_without_gpu(src, detail)
    assert err.value.status == Status.compile_error and err.value.stage == "compile_sm90"
    assert "no_such_helper" in err.value.reason and detail["sm90"]["status"] == "compile_error"


@needs_nvcc
def test_without_a_gpu_the_verdict_is_unverified_never_ok(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEARCH_CACHE", str(tmp_path))
    detail: dict = {}
    with pytest.raises(CandidateFailure) as err:
        judge_without_gpu(SMALL, detail)
    assert err.value.status == Status.unverified
    assert "no GPU" in err.value.reason and "did not run" in err.value.reason and "scale_kernel" in err.value.reason
    assert detail["sm90"]["kernels"][0]["registers"] > 0


def test_without_nvcc_the_check_says_so_and_skips(monkeypatch):
    monkeypatch.setattr(cuda_check, "find_nvcc", lambda: None)
    report = cuda_report(SMALL)
    assert report["status"] == "skipped" and "no nvcc" in report["error"]
    with pytest.raises(CandidateFailure) as err:
        judge_without_gpu(SMALL, {})
    assert err.value.status == Status.unverified and "not compiled" in err.value.reason


@needs_nvcc
def test_the_judge_on_a_cpu_ends_a_cuda_candidate_unverified_with_its_report_in_the_row(tmp_path, monkeypatch):
    """Through judge.harness.evaluate as a worker runs it: no runner loads the candidate (torch's CPU build cannot
    build it: CUDA_HOME), the stored row carries the sm_90a report."""
    import json

    from kernelsearch.judge.harness import evaluate
    from kernelsearch.judge.problem import load_problem
    from kernelsearch.judge.settings import EvalSettings

    monkeypatch.setenv("KERNELSEARCH_CACHE", str(tmp_path))
    result = evaluate(load_problem("softmax"), SMALL, EvalSettings(), mode="cpu", seed=1)
    assert result.status == Status.unverified and result.stage == "compile_sm90", result.reason
    assert result.time_ms is None and result.speedup is None   # nothing was timed
    row = result.row(1)
    detail = json.loads(row.detail_json)
    assert detail["language"] == "cuda" and detail["sm90"]["arch"] == "sm_90a"
    assert detail["sm90"]["kernels"][0]["registers"] > 0
