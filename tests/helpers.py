"""Shared test helpers: configs, candidate variants of the softmax starter, replay files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from kernelsearch.families.softmax import SPACE

# the online two-sweep softmax kernel (the family's starter until 2026-12-03, when the row-in-registers kernel
# measured faster on an H200): the honest kernel whose text the fixtures below and the stage tests edit
ONLINE = SPACE.render({**SPACE.default, "variant": "online", "num_warps": 8, "num_stages": 2, "exp2": False,
                       "stats": "lane"})

ROOT = Path(__file__).resolve().parents[1]
HOOK = "def softmax(x: torch.Tensor) -> torch.Tensor:\n"


def starter_with(prefix: str) -> str:
    """The online softmax kernel with `prefix` (indented statements) run first in its launcher."""
    assert HOOK in ONLINE
    body = "".join("    " + line + "\n" for line in prefix.strip().splitlines())
    return ONLINE.replace(HOOK, HOOK + body)


CRASH = starter_with("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
HANG = starter_with("import time\ntime.sleep(3600)")
assert "inv = 1.0 / s_row" in ONLINE
WRONG = ONLINE.replace("inv = 1.0 / s_row", "inv = 0.5 / s_row")


def write_config(tmp: Path, **over) -> Path:
    cfg = {"problem": "softmax", "store": str(tmp / "ks.db"), "device": "cpu",
           "llm": {"provider": "offline"},
           "search": {"rounds": 2, "ideas_per_round": 2, "branches_per_idea": 2, "seeds_per_round": 2,
                      "concurrency": 2},
           "evaluation": {"timeout_s": 60, "trials": 1}}
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = v
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def replay_file(tmp: Path, records: list[dict]) -> Path:
    path = tmp / "replay.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def code_reply(code: str) -> dict:
    return {"role": "code", "text": f"Here it is.\n\n```python\n{code}\n```\n", "tokens_in": 100, "tokens_out": 50}


def cli(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelsearch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)
