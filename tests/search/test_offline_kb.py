"""The offline provider on KernelBench-format files (issue 19), through the real sandbox pool on the CPU: `bench` over
a folder of an elementwise chain, a reduction along a middle dim and a sort. The first two are searched from
their matched spaces (round 0's first kernel from the reference, then one idea) and end with correct kernels; the
sort is refused before any search, in one line naming its ops, stored as a `refused` run, and the batch goes on.

Slow: four evaluations through the pool on the interpreter, about two minutes on two cores."""
from __future__ import annotations

import shutil
import sqlite3

import pytest
import yaml

from tests.helpers import ROOT, cli

FIXTURES = ROOT / "tests" / "fixtures" / "problems" / "offline"


@pytest.mark.slow
def test_offline_bench_finds_correct_kernels_for_matched_files_and_refuses_the_rest(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    for i, name in enumerate(("gelu_tanh", "sum_dim", "sort_rows"), 1):
        shutil.copy(FIXTURES / f"{name}.py", folder / f"{i}_{name}.py")
    cfg = tmp_path / "offline.yaml"
    cfg.write_text(yaml.safe_dump({
        "store": str(tmp_path / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
        "search": {"rounds": 1, "ideas_per_round": 1, "branches_per_idea": 1, "first_kernels": 1, "concurrency": 2},
        "budgets": {"evaluations": 2}, "evaluation": {"timeout_s": 120, "trials": 1}}))
    r = cli("bench", str(folder), "--config", str(cfg), "--name", "kb", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert ("3_sort_rows (run kb-3_sort_rows): not searched: llm.provider: offline: the offline provider has no "
            "kernel family for 3_sort_rows: its reference computes sort") in out
    con = sqlite3.connect(tmp_path / "ks.db")
    try:
        assert con.execute("SELECT status FROM run WHERE name = 'kb-3_sort_rows'").fetchall() == [("refused",)]
        rows = con.execute("SELECT r.name, k.round, e.status, k.code FROM run r JOIN kernel k ON k.run_id = r.id "
                           "JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL "   # verdicts
                           "ORDER BY r.name, k.id").fetchall()
    finally:
        con.close()
    by_run: dict[str, list] = {}
    for name, rnd, status, code in rows:
        by_run.setdefault(name, []).append((rnd, status, code))
    assert sorted(by_run) == ["kb-1_gelu_tanh", "kb-2_sum_dim"]
    for name, kernels in by_run.items():
        assert [(rnd, st) for rnd, st, _ in kernels] == [(0, "ok"), (1, "ok")], (name, kernels)
        assert kernels[0][2] != kernels[1][2]
    assert "pointwise(x, shift)" in by_run["kb-1_gelu_tanh"][0][2]
    assert "sum_last_dim(x.movedim(1, -1))" in by_run["kb-2_sum_dim"][0][2]
    assert "fast_p over eager (3 problems): fast_0 0.667" in out
