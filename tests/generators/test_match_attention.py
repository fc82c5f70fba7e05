"""generators/matched_attention.py: scaled dot-product attention at any head size, matched from KernelBench-format
problems written here (KernelBench 97 in kind: sdpa of fp32 (32, 32, 512, 1024)): head dims 96 and 320, Lq != Lk,
causal or not, the default and an explicit scale agree with torch on the interpreter (the scores stored once or
recomputed by each head-dim slice) and pass the judge; the flash family's shapes still get the family; a missing
scale, a softmax without the max shift on large scores and a dropped last head-dim slice fail; sdpa with a mask
tensor or dropout is refused with the reason; both kernels compile for sm_90 without spills at 97's shape."""
from __future__ import annotations

import pytest

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem

SMALL = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "BLOCK_D": 32, "num_warps": 4, "num_stages": 1,
         "precision": "ieee", "scores": False, "S_BLOCK": 64}


def _sdpa(tmp_path, name: str, kwargs: str = "", lq: int = 64, lk: int = 64, d: int = 320, dv: int | None = None,
          lead: str = "1, 2", gain: str = "", extra_arg: str = "", extra_input: str = ""):
    dv = d if dv is None else dv
    body = (f"    def forward(self, Q, K, V{extra_arg}):\n"
            f"        return torch.nn.functional.scaled_dot_product_attention(Q, K, V{kwargs})")
    inputs = (f"[torch.randn({lead}, {lq}, {d}){gain}, torch.randn({lead}, {lk}, {d}){gain}, "
              f"torch.randn({lead}, {lk}, {dv}){extra_input}]")
    return _problem(tmp_path, name, body, inputs)


@pytest.mark.parametrize("kwargs, lq, d, dv, lead", [
    ("", 64, 320, None, "1, 2"),
    (", is_causal=True", 64, 320, None, "1, 2"),
    (", scale=0.05", 64, 96, None, "1, 2"),
    (", is_causal=True, scale=0.2", 48, 96, None, "1, 2"),
    ("", 40, 96, 72, "3"),
    (", is_causal=True", 80, 320, None, "1, 2"),
])
@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_sdpa_at_any_head_size_agrees_on_the_interpreter(tmp_path, kwargs, lq, d, dv, lead):
    p = _sdpa(tmp_path, "sdpa", kwargs, lq=lq, d=d, dv=dv, lead=lead)
    m = match_problem(p)
    assert m.kind == "attention", m.summary
    assert ("causal" in m.summary) == ("is_causal" in kwargs)
    assert ("scale" in m.summary) == ("scale=" in kwargs)
    # the default (scores stored once where Dv > 256), each slice computing its scores, and the stored scores at
    # small tiles (three column slices or more everywhere, so the scores kernel runs)
    for point in (m.space.default, SMALL, {**SMALL, "BLOCK_D": 64, "BLOCK_M": 64, "precision": "tf32x3"},
                  {**SMALL, "scores": True}):
        assert m.space.feasible(point)
        _agrees(p, m.space.render(point), atol=1e-5, rtol=1e-4)


def test_the_flash_familys_shapes_still_get_the_family(tmp_path):
    for kwargs in ("", ", is_causal=True"):
        p = _sdpa(tmp_path, "sdpa_fam", kwargs, d=96)
        m = match_problem(p)
        assert m.kind == "flash_attention", m.summary
        code = m.space.render(m.space.default)
        assert f"return attention(Q, K, V, {bool(kwargs)})" in code
        _agrees(p, code, atol=1e-5, rtol=1e-4)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_the_starter_is_ok_through_the_judge_causal_or_not(tmp_path):
    settings = EvalSettings(trials=1, timing_iters=2, aot_compile=False)
    for name, kwargs in (("sdpa_judged", ""), ("sdpa_judged_causal", ", is_causal=True, scale=0.1")):
        p = _sdpa(tmp_path, name, kwargs, lq=64, lk=72, d=320)
        m = match_problem(p)
        r = evaluate(p, m.space.render(m.space.default), settings, mode="cpu", seed=6)
        assert r.status.value == "ok", (name, r.status, r.reason)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_a_missing_scale_no_max_shift_or_a_dropped_slice_fails(tmp_path):
    p = _sdpa(tmp_path, "sdpa_wrong", d=320)
    m = match_problem(p)
    code = m.space.render(SMALL)
    no_scale = code.replace("abs(scale) * LOG2E,", "LOG2E,")
    assert no_scale != code
    with pytest.raises(AssertionError):
        _agrees(p, no_scale, atol=1e-5, rtol=1e-4)
    # 320 columns in slices of 128 (the last holds 64) and the grid's last slice dropped: through the judge, which
    # poisons memory (torch.empty may hand back a freed copy of the right answer in this process)
    dropped = m.space.render({**SMALL, "BLOCK_D": 128, "scores": True}).replace(
        "slices = triton.cdiv(dv, block_d)", "slices = dv // block_d")
    assert "slices = dv // block_d" in dropped
    r = evaluate(p, dropped, EvalSettings(trials=1, timing_iters=2, aot_compile=False), mode="cpu", seed=6)
    assert r.status.value == "incorrect", (r.status, r.reason)
    # scores of about +-100 (eager's own error against float64 is 5e-5 there): without the running max subtracted
    # exp2 overflows; the same kernel agrees where scores are small
    shift = ("tl.math.exp2((qk - m_new[:, None]) * qk_scale)", "tl.math.exp2((m_i - m_new) * qk_scale)")

    def unshifted(c: str) -> str:
        out = c.replace(shift[0], "tl.math.exp2(qk * qk_scale)").replace(shift[1], "1.0")
        assert out != c
        return out

    _agrees(p, unshifted(code), atol=1e-5, rtol=1e-4)
    big = _sdpa(tmp_path, "sdpa_large", d=320, gain=" * 6")
    code = match_problem(big).space.render(SMALL)
    _agrees(big, code, atol=2e-4, rtol=1e-4)
    with pytest.raises(AssertionError):
        _agrees(big, unshifted(code), atol=2e-4, rtol=1e-4)


def test_a_mask_tensor_or_dropout_is_refused_with_the_reason(tmp_path):
    masked = _sdpa(tmp_path, "sdpa_mask", ", attn_mask=M", d=96, extra_arg=", M",
                   extra_input=", torch.randn(1, 2, 64, 64)")
    with pytest.raises(Unmatched, match="attention mask"):
        match_problem(masked)
    dropout = _sdpa(tmp_path, "sdpa_dropout", ", dropout_p=0.1", d=320)
    with pytest.raises(Unmatched, match="dropout"):
        match_problem(dropout)


@pytest.mark.slow   # two sm_90 compiles at 97's shape: 32 s on 2 cores
def test_the_starter_compiles_for_sm90_without_spills_at_kernelbench_97s_shape(tmp_path):
    # (on the CPU, in a child process: judge/aot.py) fp32 (32, 32, 512, 1024), 3xTF32: the scores kernel (128 x 128
    # x 32 tiles on 8 warps: 206 registers) and the column-slice kernel reading them (64 x 32 tiles, 256 output
    # columns on 8 warps: 254)
    from kernelsearch.judge.aot import aot_report
    from kernelsearch.judge.problem import load_file

    path = tmp_path / "sdpa97.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, Q, K, V):\n"
                    "        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)\n\n\n"
                    "def get_inputs():\n    return [torch.rand(32, 32, 512, 1024) for _ in range(3)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    problem = load_file(path)
    m = match_problem(problem)
    assert m.summary == ("attention of q 32x32x512x1024 float32, k 32x32x512x1024, v 32x32x512x1024 (a generated "
                         "flash kernel over head-dim slices)")
    d = m.space.default
    assert (d["BLOCK_D"], d["precision"], d["scores"]) == (256, "tf32x3", True)
    for point in (d, {**d, "scores": False}):
        r = aot_report(m.space.render(point), problem, problem.timed_case.name)
        assert r["status"] == "ok", r
        names = {k["name"] for k in r["kernels"]}
        assert names == ({"_attn_scores_kernel", "_attn_dslice_kernel"} if point["scores"] else
                         {"_attn_dslice_kernel"}), names
        assert all(k["spills_bytes"] == 0 for k in r["kernels"]), r["kernels"]


def test_attention_written_out_and_fp16_sdpa_get_the_generated_kernel(tmp_path):
    # q k^T / sqrt(d), softmax, @ v in torch.matmul calls (traced as _softmax, not sdpa's _safe_softmax), Lq != Lk
    body = ("    def forward(self, q, k, v):\n"
            "        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])\n"
            "        return torch.matmul(torch.softmax(s, dim=-1), v)")
    p = _problem(tmp_path, "written", body, "[torch.randn(2, 3, 40, 300), torch.randn(2, 3, 56, 300), "
                 "torch.randn(2, 3, 56, 300)]", sizes="import math")
    m = match_problem(p)
    assert (m.kind, m.summary.split(" (")[0]) == ("attention", "attention of q 2x3x40x300 float32, k 2x3x56x300, "
                                                                "v 2x3x56x300")
    _agrees(p, m.space.render(m.space.default), atol=1e-5, rtol=1e-4)
    # fp16 through sdpa's math path (upcast to fp32 and back): P rounded to fp16 before P V, as flash kernels do
    half = _problem(tmp_path, "sdpa_fp16", "    def forward(self, Q, K, V):\n        return torch.nn.functional."
                    "scaled_dot_product_attention(Q, K, V, is_causal=True)",
                    "[torch.randn(1, 2, 64, 320).half() for _ in range(3)]")
    m = match_problem(half)
    assert m.kind == "attention" and "float16" in m.summary
    _agrees(half, m.space.render(m.space.default), atol=2e-3, rtol=2e-3)
