"""A bad config fails with one clear line naming the key, before anything is stored."""
from __future__ import annotations

import pytest
import yaml

from tests.helpers import cli

CASES = [
    ({"problem": "softmax", "serach": {"rounds": 2}}, "serach: unknown key"),
    ({"problem": "softmax", "search": {"rounds": "two"}}, "search.rounds: Input should be a valid integer"),
    ({"search": {"rounds": 2}}, "problem: missing required key"),
    ({"problem": "no_such_family"}, "problem: unknown problem 'no_such_family'"),
    ({"problem": "missing/file.py"}, "problem: problem file not found"),
    ({"problem": "softmax", "llm": {"provider": "openai"}}, "needs llm.model"),
    ({"problem": "softmax", "llm": {"provider": "gemini"}}, "llm.provider: Input should be"),
    ({"problem": "softmax", "search": {"language": "rust"}},
     "search.language: Input should be 'triton', 'cuda' or 'any'"),
]


@pytest.mark.parametrize("data,expected", CASES)
def test_bad_config_one_clear_line(tmp_path, data, expected):
    cfg = tmp_path / "bad.yaml"
    data.setdefault("store", str(tmp_path / "ks.db"))
    cfg.write_text(yaml.safe_dump(data))
    r = cli("run", str(cfg), cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert expected in lines[0]
    assert not (tmp_path / "ks.db").exists()   # nothing was created


def test_missing_config_file(tmp_path):
    r = cli("run", str(tmp_path / "nope.yaml"), cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: config file not found: {tmp_path / 'nope.yaml'}"


def test_degenerate_problem_is_refused(tmp_path):
    prob = tmp_path / "const.py"
    prob.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) + 1.0

def get_inputs():
    return [torch.randn(8, 33)]

def get_init_inputs():
    return []
''')
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"problem": str(prob), "store": str(tmp_path / "ks.db"), "starter": str(prob),
                                   "llm": {"provider": "replay", "replay_file": str(prob)}}))
    r = cli("run", str(cfg), cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    assert "variance check" in r.stderr and "allow_degenerate_problem" in r.stderr
    assert not (tmp_path / "ks.db").exists()


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_kernelbench_file_the_offline_provider_cannot_match_is_refused_in_one_line(tmp_path):
    """A KernelBench file with no `starter:` is accepted (round 0 is written from the reference, issue 19); the
    offline provider searches it where its traced reference matches (generators/match.py) and refuses one that does
    not, before any search, in one line naming the ops it found, starter or not."""
    from kernelsearch.config import parse_config

    prob = tmp_path / "90_sort.py"
    prob.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return torch.sort(x, dim=1).values\ndef get_inputs():\n    return [torch.randn(4, 9)]\n"
                    "def get_init_inputs():\n    return []\n")
    for extra in ({}, {"starter": str(prob)}):
        cfg = tmp_path / "c.yaml"
        cfg.write_text(yaml.safe_dump({"problem": str(prob), "store": str(tmp_path / "ks.db"), "device": "cpu",
                                       **extra}))
        r = cli("run", str(cfg), cwd=tmp_path, timeout=120)
        assert r.returncode == 2, r.stderr
        line, = r.stderr.strip().splitlines()
        assert "llm.provider: offline:" in line and "sort" in line and "use an LLM provider" in line, line
    cfg = parse_config({"problem": str(prob), "llm": {"provider": "replay", "replay_file": str(prob)}})
    assert cfg.first_from_reference and cfg.search_setup().first_from_reference
    assert not parse_config({"problem": "softmax"}).first_from_reference
    assert parse_config({"problem": "softmax", "starter": "none"}).search_setup().first_from_reference


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_every_config_error_in_one_line(tmp_path):
    """Several problems in one config are all named at once, in one line: those pydantic finds in the keys'
    values, and those between keys (a missing file, a provider's missing settings)."""
    prob = tmp_path / "p.py"
    prob.write_text("x = 1\n")
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({"problem": str(prob), "store": str(tmp_path / "ks.db"),
                                   "starter": str(tmp_path / "nope.py"),
                                   "code": {"provider": "openai-compatible"}}))
    r = cli("run", str(cfg), cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    line, = r.stderr.strip().splitlines()
    for part in ("starter: file not found", "code: provider "
                 "'openai-compatible' needs llm.model", "code: provider 'openai-compatible' needs llm.base_url"):
        assert part in line, (part, line)
    cfg.write_text(yaml.safe_dump({"problem": "softmax", "serach": {}, "search": {"rounds": "two", "seed": "x"}}))
    line, = cli("run", str(cfg), cwd=tmp_path, timeout=120).stderr.strip().splitlines()
    for part in ("serach: unknown key", "search.rounds: Input should be a valid integer", "search.seed: Input"):
        assert part in line, (part, line)
    assert not (tmp_path / "ks.db").exists()
