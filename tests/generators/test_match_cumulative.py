"""The generated scan family (generators/cumulative.py): cumsum and cumprod along one dim, with a mask multiply, flips
and the exclusive form, on KernelBench-format problems written here (level 1's 89-93 scans, at interpreter sizes):
what each is matched to, that the kernels agree with the reference at several points of the space (chunks shorter
than a row, so the carry between chunks is exercised), that a wrong kernel does not, and what is not matched."""
from __future__ import annotations

import pytest

from kernelsearch.generators.match import match_problem
from tests.generators.test_match import _agrees, _problem

_INIT = "    def __init__(self, dim):\n        super(Model, self).__init__()\n        self.dim = dim\n"
_ROWS = "batch_size = 13\ninput_shape = (301,)\ndim = 1"
_X = "[torch.rand(batch_size, *input_shape)]"


def _scan(tmp_path, name: str, expr: str, inputs: str = _X, sizes: str = _ROWS, args: str = "x"):
    return _problem(tmp_path, name, _INIT + f"    def forward(self, {args}):\n        return {expr}", inputs,
                    init="[dim]", sizes=sizes)


def _points(space):
    # the default (one chunk a row here), chunks of 64 with 4 rows a program and prefetch, chunks of 32 on one warp
    return [space.default, {"CHUNK": 64, "ROWS": 4, "num_warps": 2, "PREFETCH": True},
            {"CHUNK": 32, "ROWS": 2, "num_warps": 1, "PREFETCH": False}]


def _every_point(problem, space, **kw):
    for p in _points(space):
        assert not space.infeasible(p), p
        for case in problem.cases:
            _agrees(problem, space.render(p), case=case, **kw)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_cumsum_and_cumprod_of_the_last_dim_agree_at_several_points(tmp_path):
    cumsum = _scan(tmp_path, "cumsum", "torch.cumsum(x, dim=self.dim)")
    m = match_problem(cumsum)
    assert (m.kind, m.summary) == ("cumulative", "cumsum over dim 1 of 13x301 (x float32)")
    assert m.space.default == {"CHUNK": 512, "ROWS": 1, "num_warps": 2, "PREFETCH": True}
    _every_point(cumsum, m.space)
    # a carry that forgets the earlier chunks fails once a row spans several chunks
    code = m.space.render(_points(m.space)[1])
    assert "carry = _combine(carry, tl.reduce(v, 1, _combine))" in code
    with pytest.raises(AssertionError):
        _agrees(cumsum, code.replace("carry = _combine(carry, tl.reduce(v, 1, _combine))", "carry = carry"))

    cumprod = _scan(tmp_path, "cumprod", "torch.cumprod(x, dim=self.dim)",
                    inputs="[torch.rand(batch_size, *input_shape) * 0.2 + 0.9]")
    m = match_problem(cumprod)
    assert (m.kind, m.summary) == ("cumulative", "cumprod over dim 1 of 13x301 (x float32)")
    _every_point(cumprod, m.space)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_reverse_and_exclusive_cumsum_as_kernelbench_writes_them(tmp_path):
    rev = _scan(tmp_path, "rev", "torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)")
    m = match_problem(rev)
    assert m.summary == "cumsum over dim 1 of 13x301 (x float32) from the end (flip, scan, flip)"
    _every_point(rev, m.space)
    # a suffix scan is not the prefix scan: the same kernel scanning forward fails
    code = m.space.render(_points(m.space)[1])
    with pytest.raises(AssertionError):
        _agrees(rev, code.replace("REV=True", "REV=False"))

    exclusive = _scan(tmp_path, "exclusive", "torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), "
                      "torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), dim=self.dim)), "
                      "dim=self.dim)")
    m = match_problem(exclusive)
    assert m.summary == "exclusive cumsum over dim 1 of 13x301 (x float32)"
    _every_point(exclusive, m.space)
    with pytest.raises(AssertionError):   # the inclusive scan is off by one position
        _agrees(exclusive, m.space.render(m.space.default).replace("SHIFT=True", "SHIFT=False"))

    # one flip alone: the scan's output flipped, or its input
    for name, expr, says in (("flip_out", "torch.cumsum(x, dim=self.dim).flip(-1)", ", flipped"),
                             ("flip_in", "torch.cumprod(x.flip(self.dim), dim=-1)", " of the input flipped")):
        p = _scan(tmp_path, name, expr)
        m = match_problem(p)
        assert m.summary.endswith(says)
        _agrees(p, m.space.render(_points(m.space)[1]))


def test_masked_cumsum_reads_a_bool_mask(tmp_path):
    masked = _scan(tmp_path, "masked", "torch.cumsum(x * mask, dim=self.dim)", args="x, mask",
                   inputs="[torch.rand(batch_size, *input_shape), "
                          "torch.randint(0, 2, (batch_size, *input_shape)).bool()]")
    m = match_problem(masked)
    assert m.summary == "cumsum of elementwise mul over dim 1 of 13x301 (x float32, mask bool)"
    _every_point(masked, m.space)
    with pytest.raises(AssertionError):   # the mask ignored
        _agrees(masked, m.space.render(m.space.default).replace("v0 = (x0 * x1)", "v0 = x0"))


def test_a_middle_dim_is_scanned_through_strides(tmp_path):
    mid = _scan(tmp_path, "mid", "torch.cumsum(x, dim=self.dim)",
                sizes="batch_size = 5\ninput_shape = (37, 19)\ndim = 1")
    m = match_problem(mid)
    assert (m.summary, m.space.default) == ("cumsum over dim 1 of 5x37x19 (x float32)",
                                            {"CHUNK": 64, "ROWS": 32, "num_warps": 4, "PREFETCH": False})
    _every_point(mid, m.space)


def test_infeasible_points_and_graphs_outside_the_pattern(tmp_path):
    m = match_problem(_scan(tmp_path, "cumsum", "torch.cumsum(x, dim=self.dim)"))
    at = lambda chunk, rows, warps: m.space.infeasible(  # noqa: E731
        {"CHUNK": chunk, "ROWS": rows, "num_warps": warps, "PREFETCH": False})
    assert "past the scanned length" in at(1024, 1, 4)
    assert "idle" in at(16, 1, 4)
    assert "registers" in at(512, 4, 1) and "registers" in at(512, 16, 4) and not at(512, 16, 8)
    # an op after the scan, a flip along another dim, a cat that is not the exclusive form: not this family's
    for name, expr in (("after", "torch.cumsum(x, dim=self.dim) * 2"),
                       ("other_flip", "torch.cumsum(x.flip(0), dim=self.dim)"),
                       ("cat", "torch.cat((x[:, :1], torch.cumsum(x[:, :-1], dim=self.dim)), dim=self.dim)")):
        found = None
        try:
            found = match_problem(_scan(tmp_path, name, expr))
        except Exception:   # noqa: BLE001 - Unmatched
            pass
        assert found is None or found.kind != "cumulative", (name, found.summary)
