"""A whole run against an OpenAI-compatible server on 127.0.0.1, through the real openai SDK.

The ideas in the tree are the server's; the API key is nowhere in the database, the run's output, or a
worker's environment (the kernels the server writes print their whole environment into the stored output).
"""
from __future__ import annotations

import itertools
import re
import sqlite3

import pytest

from tests.agent.loopback import LoopbackLLM
from tests.helpers import HOOK, cli, write_config

SECRET = "sk-loop-7f3e9a1c5b2d4e6f8a0b1c2d3e4f5a6b"
_PY = re.compile(r"```python\n(.*?)^```", re.S | re.M)
_counter = itertools.count(1)


def _code_for(messages):
    seed = _PY.findall("\n".join(m["content"] for m in messages))[-1]
    k = next(_counter)
    dump = "    import os\n    print('WORKER-ENV', sorted(os.environ.items()))\n"
    return f"# loopback variant {k}\n" + seed.replace(HOOK, HOOK + dump, 1)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_openai_compatible_run_and_the_key_stays_out(tmp_path):
    with LoopbackLLM(code_for=_code_for, require_key=SECRET) as llm:
        cfg = write_config(tmp_path, llm={"provider": "openai-compatible", "model": "loop-model",
                                          "base_url": llm.openai_base_url, "api_key_env": "LOOP_API_KEY",
                                          "max_retries": 1},
                           prices={"loop-model": {"input": 1.0, "output": 2.0}},
                           search={"rounds": 1, "ideas_per_round": 2, "branches_per_idea": 1, "timings": 1})
        r = cli("run", str(cfg), "--name", "net", cwd=tmp_path, env={"LOOP_API_KEY": SECRET})
        assert r.returncode == 0, r.stdout + r.stderr
        assert llm.count() == 3   # one idea call, two code calls
        assert "no price" not in r.stdout
    db = tmp_path / "ks.db"
    con = sqlite3.connect(db)
    statuses = con.execute("SELECT e.status FROM evaluation e JOIN kernel k ON k.id = e.kernel_id "
                           "WHERE k.idea_id IS NOT NULL AND e.purpose IS NULL").fetchall()   # verdicts
    calls = con.execute("SELECT role, status, tokens_in > 0, tokens_out > 0, cost_usd > 0 FROM llmcall "
                        "ORDER BY id").fetchall()
    outputs = [o for (o,) in con.execute("SELECT detail_json FROM evaluation").fetchall()]
    con.close()
    assert statuses == [("ok",), ("ok",)]
    assert calls == [("ideas", "ok", 1, 1, 1), ("code", "ok", 1, 1, 1), ("code", "ok", 1, 1, 1)]
    assert any("WORKER-ENV" in o for o in outputs)           # the dump ran and was stored
    assert not any("LOOP_API_KEY" in o for o in outputs)     # the variable never reached a worker
    tree = cli("tree", "net", "--db", str(db), cwd=tmp_path)
    assert "Loopback idea 1" in tree.stdout and "Loopback idea 2" in tree.stdout
    for f in tmp_path.iterdir():
        if f.name.startswith("ks.db"):
            assert SECRET.encode() not in f.read_bytes(), f.name
    assert SECRET not in r.stdout + r.stderr + tree.stdout


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_wrong_key_is_a_clear_error_and_not_retried(tmp_path):
    with LoopbackLLM(require_key=SECRET) as llm:
        cfg = write_config(tmp_path, llm={"provider": "openai-compatible", "model": "loop-model",
                                          "base_url": llm.openai_base_url, "api_key_env": "LOOP_API_KEY"},
                           search={"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1})
        r = cli("run", str(cfg), "--name", "bad-key", cwd=tmp_path, env={"LOOP_API_KEY": "sk-wrong-key-123"})
        assert llm.count() == 1   # a 401 is not retried
    assert r.returncode == 2
    assert "warning: no price for loop-model" in r.stdout   # this config set no prices
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    line = lines[0]
    assert line.startswith("error: ") and "$LOOP_API_KEY" in line and "resume bad-key" in line   # names the variable
    assert "sk-wrong-key-123" not in line
    con = sqlite3.connect(tmp_path / "ks.db")
    (status, error, attempts), = con.execute("SELECT status, error, attempts FROM llmcall").fetchall()
    assert con.execute("SELECT status, stop_reason FROM run").fetchall() == [("interrupted", "auth_error")]
    con.close()
    assert (status, attempts) == ("error", 1)
    assert "401" in error or "auth" in error.lower()
    assert "sk-wrong-key-123" not in error
