"""search.language and the device in the system prompt (agent/roles.py, prompts/language_*.md, cuda_contract.md):
the coder is told the language it writes and, for CUDA C++, the contract; the device is named from measured
ceilings, never a datasheet's."""
from __future__ import annotations

import pytest

from kernelsearch.agent.roles import Coder, device_text, language_text
from kernelsearch.agent.settings import LLMConfig
from kernelsearch.config import ConfigError, parse_config

H100 = {"device": "NVIDIA H100 80GB HBM3", "copy_gbps": 3012.0, "bfloat16_tflops": 612.4, "float32_tflops": 51.0}


def _system(language: str, device=lambda: device_text("cuda", H100)) -> str:
    coder = Coder(provider=None, cfg=LLMConfig(), prices={}, record=lambda row: 0, language=language, device=device)
    return coder._system().content


def test_cuda_contract_only_where_cuda_may_be_written():
    triton, cuda, any_ = _system("triton"), _system("cuda"), _system("any")
    for text in (cuda, any_):
        assert "load_inline" in text and "at::cuda::getCurrentCUDAStream()" in text and "sm_90a" in text
    assert "getCurrentCUDAStream" not in triton and "@triton.jit" in triton
    assert "@triton.jit" not in cuda
    assert "$" not in cuda + triton + any_   # every placeholder filled


def test_device_from_measured_ceilings():
    text = _system("triton")
    assert "NVIDIA H100 80GB HBM3" in text and "3.01 TB/s" in text and "612 TFLOP/s dense bf16" in text
    assert "H200" not in text and "4.8 TB/s" not in text and "690" not in text
    assert "measured at the run's first evaluation" in device_text("cuda", None)
    assert "no GPU" in device_text("cpu") and "sm_90a" in device_text("cpu")


def test_unknown_language_names_the_key():
    with pytest.raises(ValueError, match="search.language: 'rust'"):
        language_text("rust")
    with pytest.raises(ConfigError, match="search.language: Input should be 'triton', 'cuda' or 'any'"):
        parse_config({"problem": "softmax", "search": {"language": "rust"}})
    assert parse_config({"problem": "softmax"}).search.language == "triton"
    assert parse_config({"problem": "softmax", "search": {"language": "cuda"}}).search.language == "cuda"


def test_cuda_language_without_a_cuda_starter_writes_first_kernels():
    """A family with no starter_cuda.py under search.language: cuda starts from first kernels (in CUDA C++)."""
    assert parse_config({"problem": "matmul", "search": {"language": "cuda"}}).first_from_reference
    assert not parse_config({"problem": "matmul"}).first_from_reference
