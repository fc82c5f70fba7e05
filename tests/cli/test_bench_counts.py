"""fast_p as KernelBench counts it: every problem of a `kernelsearch bench` batch is a row of the store from the
batch's start (a problem not reached is `pending`, one that cannot be searched `refused` with its reason), so the
table bench prints, `report`, `compare` and `runs` count the same problems; torch.compile is timed by default
(`--no-compile` skips it); the report draws a bar per problem."""
from __future__ import annotations

import io
import re
import sqlite3

import pytest
import yaml
from rich.console import Console

from kernelsearch.bench import REFUSED, Row, enrol, print_table, with_compile
from kernelsearch.config import parse_config
from kernelsearch.views.bars import speedup_bars
from tests.helpers import cli

_SORT = '''import torch
import torch.nn as nn

batch_size = 4
dim = 37


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1)[0]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
_BROKEN = _SORT.replace("torch.sort(x, dim=1)[0]", "x @ x")   # 4x37 @ 4x37: the reference fails on its inputs


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _batch(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "1_sort.py").write_text(_SORT)
    (kb / "2_broken.py").write_text(_BROKEN)
    cfg = tmp_path / "kb.yaml"
    cfg.write_text(yaml.safe_dump({"store": str(tmp_path / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
                                   "search": {"rounds": 1, "concurrency": 1},
                                   "evaluation": {"timeout_s": 60, "trials": 1}}))
    return kb, cfg


@pytest.mark.slow   # about 13 s on 2 cores: a CLI batch of KernelBench files
def test_refused_problems_are_rows_and_every_view_counts_every_problem(tmp_path):
    kb, cfg = _batch(tmp_path)
    db = tmp_path / "ks.db"
    env = {"COLUMNS": "200"}
    r = cli("bench", str(kb), "--config", str(cfg), "--name", "kb", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch.compile: timed beside eager on a GPU (--no-compile skips it)" in r.stdout
    rows = _rows(db, "SELECT name, status, stop_reason, config_json FROM run ORDER BY name")
    assert [(n, s) for n, s, _, _ in rows] == [("kb-1_sort", REFUSED), ("kb-2_broken", REFUSED)]
    assert "offline provider has no kernel family for 1_sort" in rows[0][2] and "sort" in rows[0][2]
    assert "the reference failed on its own inputs" in rows[1][2]
    assert all('"compare_compile":true' in c for _, _, _, c in rows)   # bench's default
    assert "fast_p over eager (2 problems): fast_0 0.000" in r.stdout
    assert "2 of 2 problems refused (no kernel searched; counted as not correct in fast_p):" in r.stdout
    assert re.search(r"^  1_sort: llm.provider: offline: the offline provider has no kernel family", r.stdout, re.M)

    # report, compare and runs read the same two problems, refused, with the same fast_p
    page = tmp_path / "kb.html"
    rep = cli("report", "kb", "--db", str(db), "-o", str(page), cwd=tmp_path, env=env)
    assert rep.returncode == 0, rep.stderr
    html = page.read_text()
    assert "2 problems, 0 with a correct kernel" in html and "the reference failed on its own inputs" in html
    assert html.count('class="fails"') == 2   # a cross per problem with no correct kernel
    cmp_ = cli("compare", "kb", "kb", "--db", str(db), cwd=tmp_path, env=env)
    assert cmp_.returncode == 0, cmp_.stderr
    assert "A kb: fast_p over eager (2 problems): fast_0 0.000" in cmp_.stdout
    runs = cli("runs", "--db", str(db), cwd=tmp_path, env=env)
    assert runs.returncode == 0, runs.stderr
    assert "batch kb: fast_p over eager (2 problems): fast_0 0.000" in runs.stdout

    # a rerun tries the refused problems again (the generators may have grown) and stores one row each, not two;
    # --no-compile is written into the runs' config
    r = cli("bench", str(kb), "--config", str(cfg), "--name", "kb", "--no-compile", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[1/2] 1_sort (run kb-1_sort): starting" in r.stdout and "torch.compile: not timed" in r.stdout
    rows = _rows(db, "SELECT name, status, config_json FROM run ORDER BY name")
    assert [(n, s) for n, s, _ in rows] == [("kb-1_sort", REFUSED), ("kb-2_broken", REFUSED)]
    assert all('"compare_compile":false' in c for _, _, c in rows)


def test_a_problem_not_reached_is_a_pending_row_counted_by_the_report(tmp_path):
    """A batch interrupted before its second problem: that problem is already a `pending` row, so the report counts
    it in fast_p's denominator as the table does."""
    kb, cfg = _batch(tmp_path)
    raw = yaml.safe_load(cfg.read_text())
    files = sorted(kb.glob("*.py"))
    db = tmp_path / "ks.db"
    configs = {f: parse_config({**raw, "problem": str(f), "name": f"kb-{f.stem}"}, source=str(cfg)) for f in files}
    enrol(db, "kb", files, configs)
    enrol(db, "kb", files, configs)   # again: no second row
    assert _rows(db, "SELECT name, status FROM run ORDER BY name") == [("kb-1_sort", "pending"),
                                                                      ("kb-2_broken", "pending")]
    page = tmp_path / "kb.html"
    rep = cli("report", "kb", "--db", str(db), "-o", str(page), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "2 problems, 0 with a correct kernel" in page.read_text()


def test_compile_is_timed_unless_no_compile_or_the_config_says_otherwise():
    assert with_compile({}, False)["evaluation"] == {"compare_compile": True}
    assert with_compile({"evaluation": {"trials": 1}}, False)["evaluation"] == {"trials": 1, "compare_compile": True}
    assert with_compile({"evaluation": {"compare_compile": False}}, False)["evaluation"]["compare_compile"] is False
    assert with_compile({"evaluation": {"compare_compile": True}}, True)["evaluation"]["compare_compile"] is False


def test_the_table_names_refused_problems_and_counts_them():
    rows = [Row("1_a", "b-1_a", "finished", best=3.0, correct=True),
            Row("2_conv", "b-2_conv", REFUSED, refused="llm.provider: offline: no kernel family for 2_conv")]
    buf = io.StringIO()
    print_table(rows, Console(file=buf, width=60))
    out = buf.getvalue()
    assert "fast_p over eager (2 problems): fast_0 0.500, fast_1 0.500" in out
    assert "1 of 2 problems refused" in out and "  2_conv: llm.provider: offline: no kernel family" in out


def test_the_bar_chart_draws_each_problem_on_a_log_scale():
    rows = [Row("1_fast", "b-1", "finished", best=4.0, best_compile=2.0, correct=True),
            Row("2_slow", "b-2", "finished", best=0.25, correct=True),
            Row("3_wrong", "b-3", "finished", correct=False),
            Row("4_conv", "b-4", REFUSED, refused="no family")]
    svg = speedup_bars(rows)
    bars = re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="[^"]+"><title>'
                      r'([^<]+)</title>', svg)
    assert [t for _, _, t in bars] == ["1_fast: 4x over eager", "1_fast: 2x over torch.compile",
                                       "2_slow: 0.25x over eager"]
    h = {t: float(hh) for _, hh, t in bars}
    # log2: 4x is twice as tall as 2x, and 1/4x as tall as 4x (drawn down from the 1x line)
    assert abs(h["1_fast: 4x over eager"] - 2 * h["1_fast: 2x over torch.compile"]) < 0.2
    assert abs(h["1_fast: 4x over eager"] - h["2_slow: 0.25x over eager"]) < 0.2
    y = {t: float(yy) for yy, _, t in bars}
    assert y["2_slow: 0.25x over eager"] > y["1_fast: 4x over eager"]
    assert svg.count('class="fails"') == 2 and "4_conv: refused: no family" in svg
    assert ">1/4x<" in svg and ">4x<" in svg   # ticks at powers of two
