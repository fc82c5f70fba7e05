"""The GPT-2-style example from Hugging Face transformers (the optional extra `.[models]`): its LayerNorms and Conv1D
projections are extracted as the layernorm and matmul families and swapped back in."""
import os

import pytest

pytest.importorskip("transformers", reason="the optional extra .[models] (transformers) is not installed")

from kernelsearch.model.extract import extract  # noqa: E402
from kernelsearch.model.profile import load_model, model_inputs, profile  # noqa: E402
from kernelsearch.model.verify import run_request  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GPT2 = os.path.join(HERE, "..", "..", "configs", "models", "gpt2_hf.py")


@pytest.mark.slow   # importing transformers takes ~10 s on the CPU
def test_gpt2_layernorm_and_conv1d_are_extracted_and_swapped_in(monkeypatch):
    monkeypatch.setenv("KERNELSEARCH_MODEL_SIZE", "tiny")
    model, module = load_model(GPT2, "cpu", 0)
    parts = {p.key: p for p in extract(profile(model, model_inputs(module, "cpu", 1), "cpu", iters=1))}
    ln, qkv = parts["layernorm-32x64-float32"], parts["matmul-32x192x64-float32"]
    assert len(ln.swap["paths"]) == 5 and ln.swap["eps"] == pytest.approx(1e-5)   # ln_1, ln_2 of 2 layers, ln_f
    assert qkv.swap["kind"] == "conv1d" and qkv.swap["bias"]
    winners = [{"key": p.key, "part": dict(p.__dict__), "kernel_file": os.path.join(HERE, "fixtures", f),
                "kernel_id": 1, "speedup": 1.5, "share": p.share} for p, f in ((ln, "layernorm_torch.py"),
                                                                               (qkv, "matmul_torch.py"))]
    out = run_request({"model": GPT2, "device": "cpu", "seed": 3, "iters": 1, "compile": False,
                       "tolerance": {"float32": 1e-4}, "output_dtype": "float32", "winners": winners})
    assert [r["status"] for r in out["problems"]] == ["ok", "ok"], out
    assert out["rel_error"] < 1e-5
