"""`evaluation.allow_torch`: a config may allow named torch operations per problem (a level-2 solution keeps its
GEMM in the library), enforced by the checks that enforce the strict default. The scan matches an allowance by
identity, so an allowance of one operation lets nothing else through, however it is named or reached; the judge
records which allowed operations a kernel used; the kernel-launch check still wants a kernel of its own at work.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelsearch.judge.scan import ALLOWABLE_TORCH, scan_source
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import CandidateFailure, Status

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "allow_torch"
PROBLEM = HERE / "linear_relu.py"

HEAD = '''import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


def relu_(y):
    _k[(triton.cdiv(y.numel(), 256),)](y, y.numel(), B=256)
    return y


class ModelNew(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o)

    def forward(self, x):
'''

# each body: the operation the allowance must name for the scan to pass it
USES = {
    "module": ("        return relu_(self.lin(x))", "linear"),
    "module_forward": ("        return relu_(self.lin.forward(x))", "linear"),
    "functional": ("        return relu_(F.linear(x, self.lin.weight, self.lin.bias))", "linear"),
    "torch.matmul": ("        return relu_(torch.matmul(x, self.lin.weight.t()))", "matmul"),
    "operator": ("        return relu_(x @ self.lin.weight.t())", "matmul"),
    "method": ("        return relu_(x.matmul(self.lin.weight.t()))", "matmul"),
    "held": ("        mm = torch.matmul\n        return relu_(mm(x, self.lin.weight.t()))", "matmul"),
}

# under an allowance of matmul and linear, every one of these computes something else in torch
ATTACKS = {
    "softmax": "        return relu_(torch.softmax(self.lin(x), -1))",
    "import_alias": "        from torch import softmax as matmul\n        return relu_(matmul(x, -1))",
    "rebound": "        f = torch.matmul\n        f = torch.softmax\n        return relu_(f(x, -1))",
    "method_on_result": "        return relu_(torch.matmul(x, self.lin.weight.t()).softmax(-1))",
    "arithmetic_on_result": "        return relu_(self.lin(x)) * 2",
    "epilogue_on_result": "        return relu_(self.lin(x).relu())",
    "built_name": "        return relu_(getattr(torch, 'mat' + 'mul')(x, self.lin.weight.t()))",
    "constant_getattr": "        return relu_(getattr(torch, 'softmax')(x, -1))",
    "unbound_method": "        return relu_(torch.Tensor.softmax(x, -1))",
    "aten": "        return relu_(torch.ops.aten.mm(x, self.lin.weight.t()))",
    "other_matmul": "        return relu_(torch.linalg.matmul(x, self.lin.weight.t()))",
    "container": "        return relu_(nn.Sequential(self.lin)(x))",
    "class_forward": "        return relu_(nn.Linear.forward(self.lin, x))",
    "functional_softmax": "        return relu_(F.softmax(x, -1))",
}


def _scan(body: str, allow=()) -> dict:
    return scan_source(HEAD + body + "\n", allow=allow)


@pytest.mark.parametrize("name", list(USES))
def test_an_allowed_use_passes_only_with_its_allowance(name):
    body, op = USES[name]
    with pytest.raises(CandidateFailure) as err:   # the strict default
        _scan(body)
    assert err.value.status is Status.rejected and err.value.reason.startswith("torch-compute check")
    other = "matmul" if op == "linear" else "linear"
    with pytest.raises(CandidateFailure) as err:   # another operation's allowance
        _scan(body, (other,))
    assert f"this problem allows only: {other}" in err.value.reason
    assert _scan(body, (op,))["torch_ops"] == [op]


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_allowance_lets_nothing_else_through(name):
    with pytest.raises(CandidateFailure) as err:
        _scan(ATTACKS[name], ("matmul", "linear"))
    assert err.value.status is Status.rejected, err.value.reason


def test_a_kernel_that_calls_nothing_of_torch_records_no_operation():
    assert _scan("        return relu_(x.contiguous().clone())", tuple(ALLOWABLE_TORCH))["torch_ops"] == []


def test_the_config_refuses_an_operation_that_cannot_be_allowed():
    with pytest.raises(ValidationError) as err:
        EvalSettings(allow_torch=["matmul", "softmax"])
    assert "'softmax' is not an operation that can be allowed" in str(err.value)
    assert EvalSettings(allow_torch=["linear", "matmul", "linear"]).allow_torch == ["matmul", "linear"]


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_through_the_judge_an_allowed_gemm_is_ok_and_recorded_and_the_rest_is_rejected():
    """The real pool on the CPU interpreter, the problem file under `allow_torch: [linear]`: the honest solution is
    ok with `linear` recorded; the alias cheat is rejected by the scan; the library-only one by the kernel-launch
    check. Under the strict default the honest solution is rejected."""
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    names = ["gemm_in_library", "epilogue_by_alias", "library_only"]
    sources = [(HERE / f"{n}.py").read_text() for n in names]

    def run(allow: list[str], srcs: list[str]):
        pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=3, evaluation=EvalSettings(
            trials=1, timeout_s=120, timing_iters=2, aot_compile=False, allow_torch=allow)))

        async def go():
            return await asyncio.gather(*(pool.evaluate(s, {"file": str(PROBLEM)}) for s in srcs))
        try:
            return asyncio.run(go())
        finally:
            pool.close()

    honest, alias, library = run(["linear"], sources)
    assert honest.status is Status.ok, (honest.reason, honest.error_text)
    assert honest.torch_ops == "linear" and honest.detail["allow_torch"] == ["linear"]
    assert honest.row(1).torch_ops == "linear"   # the store's column
    assert alias.status is Status.rejected and alias.reason.startswith("torch-compute check"), alias.reason
    assert "torch.nn.functional.relu" in alias.reason
    assert library.status is Status.rejected and library.reason.startswith("kernel-launch check"), library.reason
    assert library.torch_ops == "linear"
    strict, = run([], sources[:1])
    assert strict.status is Status.rejected and "torch.nn.Linear" in strict.reason, strict.reason
    assert strict.torch_ops is None
