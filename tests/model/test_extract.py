"""kernelsearch/model: the tiny LLaMA-style model profiled on the CPU, its problems extracted with their real shapes,
and a family at a model's shape as a problem in the one contract."""
import os

import pytest

from kernelsearch.config import ConfigError, parse_config
from kernelsearch.families import load_problem
from kernelsearch.judge.problem import ProblemError
from kernelsearch.model.extract import extract
from kernelsearch.model.profile import load_model, model_inputs, norm_path, profile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA = os.path.join(ROOT, "configs", "models", "llama_style.py")


@pytest.fixture(scope="module")
def tiny_profile():
    old = os.environ.get("KERNELSEARCH_MODEL_SIZE")
    os.environ["KERNELSEARCH_MODEL_SIZE"] = "tiny"   # batch 2 x 16 tokens, hidden 64, 4 heads, intermediate 128
    try:
        model, module = load_model(LLAMA, "cpu", 0)
        prof = profile(model, model_inputs(module, "cpu", 1), "cpu", iters=1)
    finally:
        if old is None:
            os.environ.pop("KERNELSEARCH_MODEL_SIZE")
        else:
            os.environ["KERNELSEARCH_MODEL_SIZE"] = old
    prof["ceilings"] = {"copy_gbps": 10.0, "float32_tflops": 0.1}
    return prof


def test_norm_path_folds_layer_numbers():
    assert norm_path("layers.3.mlp.up_proj") == "layers.*.mlp.up_proj"
    assert norm_path("h.11.attn") == "h.*.attn"
    assert norm_path("norm") == "norm"


def test_profile_groups_by_operator_module_and_shape(tiny_profile):
    rows = tiny_profile["rows"]
    assert tiny_profile["clock"] == "cpu"
    softmax = [r for r in rows if r["op"] == "aten::softmax"]
    assert len(softmax) == 1   # both layers' softmax in one row
    r = softmax[0]
    assert (r["module"], r["shapes"][0], r["dtypes"][0], r["calls"]) == ("layers.*.attn", [2, 4, 16, 16], "float32", 2)
    assert sorted(r["paths"]) == ["layers.0.attn", "layers.1.attn"]
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-6
    assert tiny_profile["output"] == {"shape": [2, 16, 64], "dtype": "float32"}


def test_extract_finds_rmsnorm_softmax_and_matmuls_at_their_real_shapes(tiny_profile):
    parts = {p.key: p for p in extract(tiny_profile)}
    norm = parts["rmsnorm-32x64-float32"]   # 2 x 16 tokens of 64: two per layer and the final norm, one problem
    assert (norm.family, norm.params, norm.calls) == ("rmsnorm", {"rows": 32, "cols": 64}, 5)
    assert "norm" in norm.swap["paths"] and len(norm.swap["paths"]) == 5
    assert norm.spec == "rmsnorm@rows=32,cols=64,dtype=float32"
    sm = parts["softmax-128x16-float32"]   # (2, 4, 16, 16) scores: 128 rows of 16
    assert (sm.family, sm.params, sm.swap["how"]) == ("softmax", {"rows": 128, "cols": 16}, "op")
    qkvo = parts["matmul-32x64x64-float32"]   # q, k, v, o projections of both layers
    assert (qkvo.family, qkvo.params, len(qkvo.swap["paths"])) == ("matmul", {"m": 32, "n": 64, "k": 64}, 8)
    assert parts["matmul-32x128x64-float32"].calls == 4   # gate and up
    assert parts["matmul-32x64x128-float32"].params == {"m": 32, "n": 64, "k": 128}   # down
    scores = parts["matmul-2x4x16x16_2x4x16x16-float32"]   # q @ k^T and p @ v: a generated problem
    assert scores.kind == "generated" and "torch.matmul(a, b)" in scores.source
    assert scores.flops == 2 * 2 * 4 * 16 * 16 * 16
    assert norm.nbytes == (2 * 32 * 64 + 64) * 4   # the family's own count at the model's case
    # the parts hold most of the profiled time (views and the like are not problems); shares of CPU profile time vary
    # with the machine's load (0.75 in a CI run, near 0.9 alone), so the bound is loose
    assert 0.5 < sum(p.share for p in parts.values()) <= 1.0 + 1e-6


def test_a_family_at_a_models_shape_is_a_problem_with_the_model_case_timed():
    p = load_problem("rmsnorm@rows=32,cols=64,dtype=float32")
    assert p.timed_case.params == {"rows": 32, "cols": 64} and p.timed_case.dtype == "float32"
    assert p.cpu_timed_case() == p.timed_case and p.timed_case.cpu
    assert sum(c.timed for c in p.cases) == 1 and len(p.cases) > 3   # its own odd cases still check correctness
    assert load_problem(p.ref).timed_case == p.timed_case   # a worker finds it again from its ref
    big = load_problem("matmul@m=4096,n=11008,k=4096,dtype=bfloat16")
    assert not big.timed_case.cpu
    with pytest.raises(ProblemError, match="takes the sizes"):
        load_problem("rmsnorm@m=3,dtype=float32")
    with pytest.raises(ProblemError, match="not a number"):
        load_problem("rmsnorm@rows=x,cols=3")


def test_config_takes_model_in_place_of_problem(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("")
    assert parse_config({"model": str(f)}).model == str(f)
    assert parse_config({"problem": "softmax@rows=3,cols=5,dtype=float32"}).problem.startswith("softmax@")
    with pytest.raises(ConfigError, match="not both"):
        parse_config({"model": str(f), "problem": "softmax"})
    with pytest.raises(ConfigError, match="model file not found"):
        parse_config({"model": str(tmp_path / "none.py")})
    with pytest.raises(ConfigError, match="plan.min_share"):
        parse_config({"model": str(f), "plan": {"min_share": 2}})


def test_the_offline_provider_takes_the_generated_problems_the_matcher_matches(tiny_profile, tmp_path):
    """The plan asks generators/match.py about each generated problem, as the child run's offline provider would:
    the elementwise add, mul and silu and the 4-D attention matmul are searchable."""
    from kernelsearch.model.pipeline import _unsearchable, _write_problem

    cfg = parse_config({"model": LLAMA, "llm": {"provider": "offline"}})
    parts = {p.key: p for p in extract(tiny_profile)}
    why = {k: _unsearchable(cfg, p, _write_problem(p, tmp_path)) for k, p in parts.items()}
    for key in ("add-2x16x64_2x16x64-float32", "mul-2x16x128_2x16x128-float32", "silu-2x16x128-float32",
                "add-2x4x16x16_16x16-float32"):   # (the last: the attention mask, broadcast over batch and heads)
        assert parts[key].kind == "generated" and why[key] is None, (key, why[key])
    # the attention products (q @ k^T, p @ v), a 4-D matmul traced as expand, view, bmm, view: the matmul family's
    # batched kernel
    assert why["matmul-2x4x16x16_2x4x16x16-float32"] is None
    from kernelsearch.generators.match import match_problem
    from kernelsearch.judge.problem import load_file

    path = _write_problem(parts["matmul-2x4x16x16_2x4x16x16-float32"], tmp_path)
    m = match_problem(load_file(path))
    assert (m.kind, m.summary) == ("matmul", "bmm of 2x4x16x16 float32 and 2x4x16x16 float32")
    assert "return bmm(a, b)" in m.space.render(m.space.default)
    assert why["softmax-128x16-float32"] is None   # families: searchable as before
    llm = parse_config({"model": LLAMA, "llm": {"provider": "openai", "model": "gpt-x"}})
    assert _unsearchable(llm, parts["matmul-2x4x16x16_2x4x16x16-float32"], "unused.py") is None
