"""The kernel-launch check's second half (judge/anticheat.Writes, run by the candidate's runner): the candidate's own
Triton kernels must have written its output. A launch that takes no output, or takes the output torch already
computed and leaves it as it was, does not count; an honest kernel writing into memory that happened to hold the same
answer from an earlier call, or whose output the host casts or slices, does."""
from __future__ import annotations

import socket

import pytest
import torch
import triton
import triton.language as tl

from kernelsearch.judge.anticheat import LaunchCounter
from kernelsearch.judge.runner import Runner


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, v, mask=offs < 0)   # stores nothing


def _honest(x):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


def _precomputed(x):   # torch did the work; its kernel takes the output and writes none of it
    y = x * 2
    _touch[(1,)](y, y.numel(), BLOCK=64)
    return y


def _dummy(x):         # a one-element launch beside the work
    d = torch.empty(1)
    _touch[(1,)](d, 1, BLOCK=64)
    return x * 2


def _host_cast(x):     # honest: its kernel writes an fp32 buffer, the host casts and slices it
    y = torch.empty(x.numel() + 64)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y[:x.numel()].to(torch.float64).clone()


_STALE: list = []


def _stale(x):         # honest, but its output memory already holds the answer (an earlier call's)
    y = _STALE[0] if _STALE else torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    _STALE[:] = [y]
    return y


@pytest.fixture()
def runner():
    a, b = socket.socketpair()
    r = Runner(a)
    r.language = "triton"
    r.module_name = __name__
    r.launches = LaunchCounter()
    r.launches.install()
    yield r
    a.close()
    b.close()


@pytest.mark.parametrize("forward, verdict", [
    (_honest, {"untouched": [], "unwritten": []}),
    (_precomputed, {"untouched": [], "unwritten": [0]}),
    (_dummy, {"untouched": [0], "unwritten": []}),
    (_host_cast, {"untouched": [], "unwritten": []}),
])
def test_which_outputs_the_candidates_kernels_wrote(runner, forward, verdict):
    runner.model = forward
    x = torch.randn(300)
    out, written = runner._forward_watched([x])
    assert torch.equal(out.to(x.dtype), x * 2)
    assert written == verdict
    assert runner.launches.watch is None


def test_an_honest_kernel_over_memory_that_held_the_answer_is_not_flagged(runner):
    runner.model = _stale
    x = torch.randn(300)
    _, first = runner._forward_watched([x])
    out, again = runner._forward_watched([x])   # the same memory, the same answer in it before the kernel ran
    assert first == again == {"untouched": [], "unwritten": []}
    assert torch.equal(out, x * 2)


def test_a_tensor_reached_through_a_tma_descriptor_counts_as_taken():
    """A TMA kernel takes Triton TensorDescriptors, not tensors (the matmul family's default): the tensor under one
    (in a tuple too) is what the launch took. Before, every honest TMA matmul was rejected on an H100 (KernelBench
    level 1: 1_, 6_, 11_, 16_)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernelsearch.judge.anticheat import Writes

    x, y = torch.randn(64, 64), torch.empty(64, 64)
    w = Writes(__name__, [x])
    w.before_launch("k", ((TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])),),
                    {})
    y.copy_(x * 2)   # what the kernel would write
    assert w.verdict([y]) == ([], {})
    assert Writes(__name__, [x]).verdict([y]) == ([0], {})   # no launch took it


def test_a_cuda_extensions_functions_are_its_launches_and_what_they_return_its_work(monkeypatch):
    """CUDA C++ (load_inline): each call of an extension's function counts as a launch of the candidate's kernels,
    and an output it returns (allocated in C++) is its work; a forward that leaves its extension unused is caught."""
    from types import SimpleNamespace

    from torch.utils import cpp_extension as ce

    ext = SimpleNamespace(double=lambda x: x * 2)   # stands in for a built extension (no GPU, no nvcc build here)
    monkeypatch.setattr(ce, "load_inline", lambda *a, **k: ext)
    a, b = socket.socketpair()
    r = Runner(a)
    r.language, r.module_name = "cuda", "ks_candidate_test"
    r.launches = LaunchCounter()
    r.launches.install_extensions(r.module_name)
    built = ce.load_inline(name="ext", cpp_sources="", functions=["double"])
    x = torch.randn(100)
    try:
        r.model = lambda x: built.double(x)
        out, written = r._forward_watched([x])
        assert torch.equal(out, x * 2) and written == {"untouched": [], "unwritten": []}
        assert r.launches.launches(r.module_name) == 1
        r.model = lambda x: x * 2                       # the extension is there, the forward does not use it
        _, written = r._forward_watched([x])
        assert written["untouched"] == [0] and r.launches.launches(r.module_name) == 1
    finally:
        a.close()
        b.close()
