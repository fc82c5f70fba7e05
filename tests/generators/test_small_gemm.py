"""GEMM tiles sized to the problem (issue 33): a level-2 GEMM with an epilogue too small to fill the device with the
matmul family's 128 x 256 TMA-persistent tiles (32 x 200 -> 120: one tile) starts from one program per 64 x 64 tile,
and its kernel agrees with the reference on the interpreter; a large one keeps the family's start."""
from __future__ import annotations

from kernelsearch.families.matmul.space import DEFAULT, SMALL_START, SPACE
from kernelsearch.generators.match import match_problem
from kernelsearch.judge.problem import Case
from tests.generators.test_match import _agrees, _problem

_LINEAR = ("    def __init__(self, i, o):\n        super().__init__()\n        self.gemm = nn.Linear(i, o)\n"
           "    def forward(self, x):\n        return torch.relu(self.gemm(x)) / 2.0")


def test_a_one_tile_gemm_with_an_epilogue_starts_from_small_tiles_and_agrees(tmp_path):
    problem = _problem(tmp_path, "small_gemm", _LINEAR, "[torch.randn(batch, 200)]", init="[200, 120]",
                       sizes="batch = 32")
    m = match_problem(problem)
    assert m.kind == "gemm_epilogue"
    start = m.space.default
    assert {k: start[k] for k in SMALL_START} == SMALL_START and start["fp32_precision"] == "tf32x3"
    _agrees(problem, m.space.render({**start, "fp32_precision": "ieee"}), case=next(c for c in problem.cases
                                                                                   if c.timed), perturb=True)


def test_a_product_that_fills_the_device_keeps_the_family_s_start():
    big = SPACE.default_for(Case("p", {"m": 4096, "n": 4096, "k": 4096}, "bfloat16", timed=True))
    assert big["variant"] == DEFAULT["variant"] and big["BN"] == DEFAULT["BN"]   # 512 tiles of 128 x 256
    skinny = SPACE.default_for(Case("p", {"m": 16, "n": 16384, "k": 4096}, "bfloat16", timed=True))
    assert skinny["variant"] == "tiled" and skinny["BM"] == 64   # 64 tiles of 128 x 256: under one wave
