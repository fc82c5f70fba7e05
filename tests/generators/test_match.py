"""The offline provider's matcher on KernelBench-format problems written here (generators/match.py, pointwise.py,
trace.py): what each reference is matched to, that the kernels it renders pass the static checks and agree with
the reference on the interpreter (in this process: the judge's own runs are in tests/search/test_offline_kb.py), and
the one-line refusal of what it cannot search."""
from __future__ import annotations

import asyncio
import json
import re

import pytest
import torch

from kernelsearch.agent.base import ChatRequest, CodeTask, IdeaBrief, IdeaTask, Message, SeedTask
from kernelsearch.agent.errors import ProviderError
from kernelsearch.agent.offline import OfflineProvider
from kernelsearch.generators.match import match_problem
from kernelsearch.judge.problem import load_file, load_source_module
from kernelsearch.judge.static import check_source, scan_source
from tests.helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "problems" / "offline"
_n = iter(range(10**6))


def _load(path):
    return load_file(path)


def _problem(tmp_path, name: str, body: str, inputs: str, init: str = "[]", sizes: str = ""):
    """A KernelBench-format file: `body` is forward's return expression, in a Model of no constructor arguments
    unless `init` gives some."""
    path = tmp_path / f"{name}.py"
    path.write_text(f"import torch\nimport torch.nn as nn\n{sizes}\n\nclass Model(nn.Module):\n{body}\n\n"
                    f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return {init}\n")
    return load_file(path)


def _agrees(problem, code: str, case=None, atol=1e-4, rtol=1e-4, perturb=False) -> torch.Tensor:
    """Run the candidate and the reference on the problem's first interpreter-sized case; return the output.
    `perturb`: the reference's parameters moved off their initial values first (the judge loads its state dict
    into the candidate, so the candidate must hold the same parameters under the same names)."""
    check_source(code)
    scan_source(code)
    case = case or problem.cases_for("cpu")[0]
    mod = load_source_module(code, f"ks_test_match_{next(_n)}")
    init = problem.build_init_inputs(case)
    torch.manual_seed(0)
    ref = problem.module.Model(*init)
    if perturb:
        with torch.no_grad():
            for p in ref.parameters():
                p.add_(torch.randn_like(p))
    new = mod.ModelNew(*init)
    new.load_state_dict(ref.state_dict(), strict=False)   # as the judge does
    xs = problem.build_inputs(case, 7, "cpu")
    with torch.no_grad():
        want = ref(*xs)
        got = new(*xs)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    return got


def test_elementwise_chain_gets_the_generated_family_and_its_kernels_agree():
    problem = _load(FIXTURES / "gelu_tanh.py")
    m = match_problem(problem)
    assert m.kind == "pointwise" and m.summary == "elementwise gelu -> mul -> tanh -> add -> sub on 16x1000 float32"
    space = m.space
    variants = [space.default, {**space.default, "variant": "persistent", "cache_hints": True},
                {**space.default, "BLOCK": 256, "num_warps": 1, "ITERS": 4}]
    for p in variants:
        _agrees(problem, space.render(p))
    # the number forward receives is read at run time, not baked in from get_inputs()
    mod = load_source_module(space.render(space.default), f"ks_test_match_{next(_n)}")
    x = torch.randn(3, 7)
    a, b = mod.ModelNew()(x, 0.25), mod.ModelNew()(x, 1.0)
    torch.testing.assert_close(a - b, torch.full_like(a, 0.75))
    assert "def forward(self, x, shift):" in space.render(space.default)
    # the space: moves land on feasible, distinct kernels; none puts more than 32 elements on a thread
    seen = {space.body(space.default)}
    for move, new in space.applicable(space.default):
        assert 1 <= new["BLOCK"] // (32 * new["num_warps"]) <= 32, (move.title, new)
        seen.add(space.body(new))
    assert len(seen) > 20
    assert space.infeasible({**space.default, "BLOCK": 256, "num_warps": 16})


def test_sum_along_a_middle_dim_gets_the_reduce_family_with_the_problems_constructor():
    problem = _load(FIXTURES / "sum_dim.py")
    m = match_problem(problem)
    assert (m.kind, m.summary) == ("reduce", "sum over dim 1 of 12x40x24 float32 (keepdim)")
    code = m.space.render(m.space.default)
    assert "def __init__(self, dim: int):" in code and "sum_last_dim(x.movedim(1, -1)).unsqueeze(1)" in code
    out = _agrees(problem, code)
    assert out.shape[1] == 1
    _agrees(problem, m.space.render({**m.space.default, "variant": "single", "ROWS": 4}))


def test_family_operations_at_other_shapes(tmp_path):
    softmax = _problem(tmp_path, "softmax_dim1", "    def forward(self, x):\n        return torch.softmax(x, dim=1)",
                       "[torch.randn(batch, 70000, 3)]", sizes="batch = 8")
    m = match_problem(softmax)
    assert m.kind == "softmax" and m.space.default["variant"] == "online"   # 70000 wide: past registers
    assert m.space.infeasible({**m.space.default, "variant": "pipelined"})
    _agrees(softmax, m.space.render(m.space.default), case=softmax.cases_for("cpu")[0])

    mm = _problem(tmp_path, "mm_tb", "    def forward(self, A, B):\n        return torch.matmul(A, B.T)",
                  "[torch.randn(M, K), torch.randn(N, K)]", sizes="M = 40\nK = 24\nN = 36")
    m = match_problem(mm)
    assert (m.kind, m.summary) == ("matmul", "mm of 40x24 float32 and 36x24 float32")
    assert "return matmul(A, B.t())" in m.space.render(m.space.default)
    _agrees(mm, m.space.render({**m.space.default, "variant": "tiled", "BM": 64, "BN": 64, "BK": 32}))

    ln = _problem(tmp_path, "ln", "    def __init__(self, shape):\n        super(Model, self).__init__()\n"
                  "        self.ln = nn.LayerNorm(shape)\n        self.act = nn.ReLU()\n"
                  "    def forward(self, x):\n        return self.ln(x)",
                  "[torch.randn(batch, 5, 33)]", init="[(5, 33)]", sizes="batch = 9")
    m = match_problem(ln)
    code = m.space.render(m.space.default)
    assert m.kind == "layernorm" and "self.act" not in code and "super().__init__()" in code
    _agrees(ln, code, perturb=True)


def test_a_linear_layer_with_activations_gets_the_matmul_family_and_a_generated_epilogue():
    """Level-2 style: x @ W^T by the matmul family's template (its search space), then the bias, GELU and scale in
    one generated elementwise kernel; the layer's weights reach the candidate by the judge's state dict."""
    problem = _load(FIXTURES / "linear_gelu.py")
    m = match_problem(problem)
    assert m.kind == "gemm_epilogue" and "then elementwise add -> gelu -> mul" in m.summary
    code = m.space.render({**m.space.default, "variant": "tiled", "BM": 64, "BN": 64, "BK": 32})
    assert "y = matmul(x, self.linear.weight.t())" in code and "return pointwise(y, self.linear.bias)" in code
    assert "def __init__(self, in_features, out_features, scale):" in code
    _agrees(problem, code, perturb=True)
    assert set(m.space.params) >= {"BM", "BN", "BK", "GROUP_M"}   # the GEMM's space is searched


def test_an_unmatched_graph_is_refused_by_the_provider_naming_the_ops():
    provider = OfflineProvider()
    req = ChatRequest([Message("user", "x")], role="code",
                      task=CodeTask({"file": str(FIXTURES / "sort_rows.py")},
                                    IdeaBrief(None, "t", "d", {"first_kernel": True}), branch=0, branches=1))
    with pytest.raises(ProviderError) as err:
        asyncio.run(provider.complete(req))
    assert re.fullmatch(r"the offline provider has no kernel family for sort_rows: its reference computes "
                        r"sort \(.*\); use an LLM provider \(openai, anthropic, openai-compatible\)",
                        str(err.value)), str(err.value)


def test_the_provider_writes_first_kernels_and_ideas_for_a_matched_file():
    """What the controller asks in round 0 (a first kernel, no seed) and in round 1 (ideas about the seed)."""
    provider = OfflineProvider(seed=1)
    ref = {"file": str(FIXTURES / "gelu_tanh.py")}
    idea = IdeaBrief(1, "First kernels from the reference", "d", {"first_kernel": True})
    first = asyncio.run(provider.complete(ChatRequest([Message("user", "x")], role="code",
                                                      task=CodeTask(ref, idea, branch=0, branches=2))))
    code = re.search(r"```python\n(.*?)```", first.text, re.S).group(1)
    space = match_problem(_load(FIXTURES / "gelu_tanh.py")).space
    assert space.params_of(code) == space.default
    ideas = asyncio.run(provider.complete(ChatRequest([Message("user", "x")], role="ideas", task=IdeaTask(
        ref, round=1, n=3, seeds=(SeedTask(1, code),), seen_codes=(code,)))))
    got = json.loads(re.search(r"```json\n(.*?)```", ideas.text, re.S).group(1))["ideas"]
    assert len(got) == 3 and all(i["seed"] == 1 and i["params"] != space.default for i in got)


def test_mean_and_max_along_a_dim_get_the_generated_reduction(tmp_path):
    mean = _problem(tmp_path, "mean_last", "    def forward(self, x):\n        return torch.mean(x, dim=-1)",
                    "[torch.randn(rows, cols)]", sizes="rows = 24\ncols = 300")
    m = match_problem(mean)
    assert (m.kind, m.summary) == ("reduction", "mean over dim 1 of 24x300 float32")
    assert m.space.default["BLOCK_I"] == 1   # the last dim: one column, long rows
    _agrees(mean, m.space.render(m.space.default))
    mx = _problem(tmp_path, "max_first",
                  "    def forward(self, x):\n        return torch.max(x, dim=0, keepdim=True)[0]",
                  "[torch.randn(rows, cols, 5)]", sizes="rows = 24\ncols = 30")
    m = match_problem(mx)
    assert m.kind == "reduction" and m.summary.startswith("max over dim 0")
    for p in (m.space.default, {**m.space.default, "BLOCK_R": 4, "BLOCK_I": 32, "num_warps": 1}):
        _agrees(mx, m.space.render(p))
    assert m.space.infeasible({**m.space.default, "BLOCK_R": 2048, "BLOCK_I": 256})


def test_an_operand_of_the_outputs_trailing_dims_is_broadcast_over_the_leading_ones(tmp_path):
    # a LLaMA attention's mask add, as a model run extracts it: (batch, heads, seq, seq) + (seq, seq)
    masked = _problem(tmp_path, "mask_add", "    def forward(self, a, b):\n        return torch.add(a, b)",
                      "[torch.randn(batch, 3, seq, seq), torch.randn(seq, seq)]", sizes="batch = 2\nseq = 24")
    m = match_problem(masked)
    assert m.kind == "pointwise" and m.summary == "elementwise add on 2x3x24x24 float32"
    code = m.space.render(m.space.default)
    assert "x1_ptr + offs % x1_n" in code and "x1.numel()" in code
    for case in masked.cases_for("cpu"):
        _agrees(masked, code, case=case)
    _agrees(masked, m.space.render({**m.space.default, "variant": "persistent", "BLOCK": 256, "num_warps": 2}))
    # broadcast along a middle dim is not a tail: refused, naming the operand
    middle = _problem(tmp_path, "mid_add", "    def forward(self, a, b):\n        return a + b",
                      "[torch.randn(2, 3, 24, 24), torch.randn(3, 1, 24)]")
    with pytest.raises(Exception, match=r"input b is \(3, 1, 24\), not broadcast"):
        match_problem(middle)


def test_batched_products_get_the_matmul_familys_batched_tiled_kernel(tmp_path):
    """torch.bmm (3-D) and a 4-D torch.matmul whose batch dims broadcast, its right operand a transposed view
    (q @ k^T with one key set shared by every head): the matmul family's `bmm` (the tiled kernel with a batch axis)
    at the problem's shapes; the variants with no batch axis refused there; the kernels agree with torch at every
    interpreter case, and one whose A batch stride is dropped does not."""
    bmm = _load(FIXTURES / "bmm.py")
    m = match_problem(bmm)
    assert (m.kind, m.summary) == ("matmul", "bmm of 6x40x24 float32 and 6x24x36 float32")
    assert m.space.default["variant"] == "tiled" and "return bmm(A, B)" in m.space.render(m.space.default)
    for variant in ("persistent", "tma", "tma_persistent"):
        assert "no batch axis" in m.space.infeasible({**m.space.default, "variant": variant})
    moved = [new for _, new in m.space.applicable(m.space.default)]
    assert moved and all(p["variant"] == "tiled" for p in moved)
    small = {**m.space.default, "BM": 64, "BN": 64, "BK": 32, "num_warps": 4}
    for p in (m.space.default, small):
        for case in bmm.cases_for("cpu"):
            _agrees(bmm, m.space.render(p), case=case)

    scores = _load(FIXTURES / "attention_scores.py")
    m = match_problem(scores)
    assert (m.kind, m.summary) == ("matmul", "bmm of 3x4x20x16 float32 and 3x1x28x16 float32")
    code = m.space.render(m.space.default)
    assert "return bmm(q, k.transpose(-2, -1))" in code
    for case in scores.cases_for("cpu"):
        _agrees(scores, code, case=case)
    _agrees(scores, m.space.render({**small, "GROUP_M": 1}))
    # the kernel must move A by its batch strides: without the inner one every head reads head 0's rows
    shift = "a_ptr += tl.program_id(2).to(tl.int64) * s_a1 + tl.program_id(1).to(tl.int64) * s_a2"
    assert shift in code
    wrong = code.replace(shift, "a_ptr += tl.program_id(2).to(tl.int64) * s_a1")
    with pytest.raises(AssertionError):
        _agrees(scores, wrong)

    # a 4-D product of equal batch dims and a 3-D one broadcast against a 4-D one, written inline
    eq = _problem(tmp_path, "mm4d", "    def forward(self, a, b):\n        return torch.matmul(a, b)",
                  "[torch.randn(2, 3, 9, 5), torch.randn(2, 3, 5, 7)]")
    m = match_problem(eq)
    assert m.summary == "bmm of 2x3x9x5 float32 and 2x3x5x7 float32"
    _agrees(eq, m.space.render(small))
    mixed = _problem(tmp_path, "mm3d4d", "    def forward(self, a, b):\n        return a @ b",
                     "[torch.randn(3, 9, 5), torch.randn(2, 3, 5, 7)]")
    _agrees(mixed, match_problem(mixed).space.render(small))


def test_the_batched_starter_compiles_for_sm90_without_spills_at_attentions_shapes(tmp_path):
    # (on the CPU, in a child process: judge/aot.py) q @ k^T of a LLaMA-style model, 8 x 32 heads of 512 x 128
    # in bf16, k^T a transposed view: the matched starter (tiled 128 x 128 x 64 on 8 warps) at 108 registers
    from kernelsearch.judge.aot import aot_report

    path = tmp_path / "scores.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, q, k):\n        return torch.matmul(q, k.transpose(-2, -1))\n\n\n"
                    "def get_inputs():\n    return [torch.randn(8, 32, 512, 128, dtype=torch.bfloat16), "
                    "torch.randn(8, 32, 512, 128, dtype=torch.bfloat16)]\n\n\ndef get_init_inputs():\n    return []\n")
    problem = load_file(path)
    m = match_problem(problem)
    assert m.summary == "bmm of 8x32x512x128 bfloat16 and 8x32x512x128 bfloat16"
    r = aot_report(m.space.render(m.space.default), problem, problem.timed_case.name)
    assert r["status"] == "ok", r
    (k,) = r["kernels"]
    assert k["name"] == "_bmm_kernel" and k["spills_bytes"] == 0, k
