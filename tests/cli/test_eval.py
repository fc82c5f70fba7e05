"""`kernelsearch eval PROBLEM CANDIDATE --json`: one candidate, one sandboxed worker, one JSON object."""
from __future__ import annotations

import json

import pytest

from tests.helpers import CRASH, ONLINE, ROOT, WRONG, cli

TORCH_ONLY = '''import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


def _eval(tmp_path, code, *extra):
    cand = tmp_path / "cand.py"
    cand.write_text(code)
    r = cli("eval", "softmax", str(cand), "--json", "--trials", "1", *extra, cwd=tmp_path, timeout=300)
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_starter_is_ok_and_timed_on_the_interpreter(tmp_path):
    rc, out = _eval(tmp_path, ONLINE)
    assert rc == 0 and out["status"] == "ok", out
    assert out["timing_kind"] == "cpu-interpreter"
    assert out["time_ms"] > 0 and out["ref_time_ms"] > 0
    assert abs(out["speedup"] - out["ref_time_ms"] / out["time_ms"]) < 1e-9


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_wrong_crash_and_torch_only(tmp_path):
    rc, out = _eval(tmp_path, WRONG)
    assert (rc, out["status"]) == (1, "incorrect") and "values off" in out["reason"]
    _, out = _eval(tmp_path, CRASH)
    assert out["status"] == "crash" and "SIGSEGV" in out["reason"]
    _, out = _eval(tmp_path, TORCH_ONLY)
    assert out["status"] == "rejected" and "no kernel of its own" in out["reason"]


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_kernelbench_file_problem(tmp_path):
    prob = tmp_path / "19_ReLU.py"
    prob.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(16, 1003)]

def get_init_inputs():
    return []
''')
    cand = tmp_path / "relu_new.py"
    cand.write_text('''import torch
import triton
import triton.language as tl

@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
''')
    r = cli("eval", str(prob), str(cand), "--json", cwd=tmp_path, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok", out
    bad = tmp_path / "relu_bad.py"
    bad.write_text(cand.read_text().replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.01)"))
    r = cli("eval", str(prob), str(bad), "--json", cwd=tmp_path, timeout=300)
    assert json.loads(r.stdout.strip().splitlines()[-1])["status"] == "incorrect"


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_kernel_only_the_interpreter_accepts_fails_the_sm90_compile(tmp_path):
    """tl.dot with K = 8 runs under the interpreter but does not compile for the H200 (K >= 16)."""
    fx = ROOT / "tests" / "fixtures" / "problems"
    r = cli("eval", str(fx / "mm8.py"), str(fx / "mm8_dot_k8.py"), "--json", cwd=tmp_path, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert (out["status"], out["stage"]) == ("compile_error", "compile_sm90"), out
    assert "K >= 16" in out["reason"] and "_mm8" in out["reason"]


@pytest.mark.slow   # 9 s on 2 cores; test_aot checks the same report in process
def test_starter_reports_registers_and_spills(tmp_path):
    rc, out = _eval(tmp_path, ONLINE)
    (k,) = out["detail"]["sm90"]["kernels"]
    assert k["name"] == "_softmax_online_kernel" and k["num_warps"] == 8
    assert 0 < k["registers"] <= 255 and k["spills_bytes"] >= 0
