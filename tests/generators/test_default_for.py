"""A family at another shape starts from the point of its space suited to that shape (families/space.py
`SearchSpace.default_for`, the families' `shaped` rules): a model's 512-wide softmax is not started from the
32-warp kernel tuned on 32000-wide rows, and the family's own timed case keeps the tuned starter.py."""
from __future__ import annotations

import pytest

from kernelsearch.families import load_family, load_problem
from kernelsearch.families.softmax.space import DEFAULT as SOFTMAX_DEFAULT
from kernelsearch.generators.match import match_problem
from kernelsearch.judge.problem import Case, load_file
from tests.helpers import ROOT

FAMILIES_DIR = ROOT / "families"


def test_softmax_at_a_models_512_wide_bf16_rows_starts_packed_on_fewer_warps():
    # the H200 model run's softmax-131072x512-bfloat16: the tuned starter was 0.132x of eager there
    problem = load_problem("softmax@rows=131072,cols=512,dtype=bfloat16")
    space = problem.family.SPACE
    start = space.default_for(problem.timed_case, problem.cases)
    assert start["BLOCK"] == 512 and start["variant"] == "single"
    assert start["num_warps"] < SOFTMAX_DEFAULT["num_warps"]
    assert start["ROWS"] > 1                      # short rows packed a few a program
    assert space.infeasible(start, problem.cases) is None
    assert problem.starter_source == space.render(start)   # round 0's seed is that point
    assert problem.starter_source != (FAMILIES_DIR / "softmax" / "starter.py").read_text()


def test_softmax_rows_packed_as_far_as_the_problems_widest_case_allows():
    space = load_family("softmax").family.SPACE
    case = Case("model", {"rows": 131072, "cols": 512}, "bfloat16", timed=True)
    alone = space.default_for(case)                              # only its own shape: 8 rows (8 KB) on 8 warps
    assert (alone["ROWS"], alone["num_warps"]) == (8, 8)
    beside = space.default_for(case, load_family("softmax").cases)   # with the 32000-wide correctness case
    assert beside["ROWS"] * 32768 <= 65536 and space.infeasible(beside, load_family("softmax").cases) is None


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "layernorm"])
def test_the_familys_own_timed_case_keeps_its_tuned_starter(name):
    family = load_family(name)
    space = family.family.SPACE
    assert space.default_for(family.timed_case, family.cases) == space.default
    dims = ",".join(f"{k}={v}" for k, v in family.timed_case.params.items())
    at = load_problem(f"{name}@{dims},dtype={family.timed_case.dtype}")
    assert at.starter_source == (FAMILIES_DIR / name / "starter.py").read_text()


def test_rmsnorm_at_the_llama_models_shape_is_the_tuned_starter():
    # 4096 x 4096 bf16 (the H200 model run's rmsnorm, 9.06x): the same row width as the timed case, the same kernel
    problem = load_problem("rmsnorm@rows=4096,cols=4096,dtype=bfloat16")
    assert problem.starter_source == (FAMILIES_DIR / "rmsnorm" / "starter.py").read_text()


def test_a_softmax_row_too_wide_for_registers_starts_from_the_online_sweep():
    space = load_family("softmax").family.SPACE
    start = space.default_for(Case("p", {"rows": 16, "cols": 70000}, "float32", timed=True))
    assert start["variant"] == "online"


def test_a_matched_kernelbench_softmax_starts_at_its_shape(tmp_path):
    path = tmp_path / "softmax_512.py"
    path.write_text("import torch\nimport torch.nn as nn\n\nbatch = 4096\ndim = 512\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\n\ndef get_inputs():\n"
                    "    return [torch.randn(batch, dim)]\n\n\ndef get_init_inputs():\n    return []\n")
    m = match_problem(load_file(path))
    assert m.kind == "softmax" and m.space.default["variant"] == "single"
    assert m.space.default["num_warps"] < SOFTMAX_DEFAULT["num_warps"] and m.space.default["ROWS"] > 1


def test_reduce_cuts_its_chunk_to_a_short_row_and_splits_few_wide_ones():
    space = load_family("reduce").family.SPACE
    short = space.default_for(Case("p", {"rows": 4096, "cols": 256}, "float32", timed=True))
    assert (short["variant"], short["BLOCK"], short["ROWS"]) == ("chunked", 256, 8)
    assert short["BLOCK"] * short["ROWS"] == space.default["BLOCK"] * space.default["ROWS"]   # the tuned tile
    few = space.default_for(Case("p", {"rows": 16, "cols": 1 << 20}, "float32", timed=True))
    assert few["variant"] == "split" and 16 * few["SPLIT"] >= 2 * 132


@pytest.mark.parametrize("case_name", ["model", "wide-odd"])
def test_the_512_wide_softmax_starter_compiles_for_sm90_without_spills(case_name):
    # (on the CPU, in a child process: judge/aot.py). At the model case the 2-warp program of 2 rows; at the
    # 4099-wide fp32 correctness case the launcher raises its warps instead of spilling (584 B before it did)
    from kernelsearch.judge.aot import aot_report

    problem = load_problem("softmax@rows=4096,cols=512,dtype=bfloat16")
    r = aot_report(problem.starter_source, problem, case_name)
    assert r["status"] == "ok", r
    (k,) = r["kernels"]
    assert k["name"] == "_softmax_rows_kernel" and k["spills_bytes"] == 0, k
    assert k["num_warps"] == (2 if case_name == "model" else 8)
