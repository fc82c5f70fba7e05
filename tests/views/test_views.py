"""The read-only commands against a store with a known tree (tests/views/known_store.py)."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.views.session import read_only_session
from kernelsearch.views.tsv import TSV_COLUMNS
from tests.views.known_store import (
    ALPHA_BEST_PATH,
    ALPHA_IDEA_OF,
    ALPHA_SPEEDUP,
    ALPHA_STATUS,
    CODES,
    build_known_store,
)

runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return build_known_store(tmp_path_factory.mktemp("views") / "known.db")


def ks(*args: str, code: int = 0) -> str:
    res = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})
    assert res.exit_code == code, f"exit {res.exit_code}:\n{res.output}\n{res.exception!r}"
    return res.output


# -- runs ----------------------------------------------------------------------------------------------------
def test_runs_lists_every_run_with_its_numbers(db):
    out = ks("runs", "--db", db)
    alpha = next(ln for ln in out.splitlines() if "alpha" in ln)
    beta = next(ln for ln in out.splitlines() if "beta" in ln)
    for want in ("softmax", "finished", "rounds_done", "4 ok", "1 compile_error", "1 incorrect", "1 timeout",
                 "1 crash", "1 queued", "2.50× k6 [cpu]", "7.0k", "$0.0450 +1 unpriced", "9m50s"):
        assert want in alpha, (want, alpha)
    assert re.search(r"│\s+2\s+│", alpha)            # rounds
    for want in ("target_speedup", "2 ok", "3.00× k21", "6.0k", "$0.50", "2m00s"):
        assert want in beta, (want, beta)
    assert "[cpu]" not in beta                        # GPU timings are not labelled as CPU ones


def test_runs_on_an_empty_store(tmp_path):
    from kernelsearch.store.database import open_store

    open_store(tmp_path / "empty.db").dispose()
    assert ks("runs", "--db", tmp_path / "empty.db").strip() == f"no runs in {tmp_path / 'empty.db'}"


# -- tree ----------------------------------------------------------------------------------------------------
ALPHA_TREE = """\
★ k1 seed ok 1.00× eager (2 ms) 0.80× compile 10% roofline
├── i1 r1 one pass with an online max (1/2 ok, best 1.50×)
│   ├── ★ k2 b0 ok 1.50× eager (1.33 ms) 1.20× compile 30% roofline
│   │   ├── i3 r2 keep the row in registers (1/2 ok, best 2.50×)
│   │   │   ├── ★ k6 b0 ok 2.50× eager (800 µs) 2.00× compile 55% roofline ← best
│   │   │   └── k7 b1 timeout: no result within 120 s; the process group was killed
│   │   └── i5 r2 unroll the reduction (0/0 ok, 2 not written)
│   └── k3 b1 incorrect: max abs err 3.1e-02 at case odd_1 (row 7)
└── i2 r1 BLOCK 4096 with 8 warps (1/2 ok, best 1.20×)
    ├── k4 b0 compile_error: CompilationError: exp() got an unexpected keyword argument 'bogus'
    └── k5 b1 ok 1.20× eager (1.67 ms) 0.96× compile 22% roofline
        └── i4 r2 vectorized loads (0/2 ok)
            ├── k8 b0 crash: worker died with SIGSEGV (illegal memory access)
            └── k9 b1 queued
"""
# k5's evaluation timed no torch.compile: its speedup over it is the run's figure (1.6 ms, the median of the three
# evaluations that timed it) over its time, as every speedup of a run is (store/clock.py)


def _body(out: str) -> str:
    """The tree under the header (the header ends at the first blank line)."""
    return out.split("\n\n", 1)[1]


def test_tree_prints_the_known_tree(db):
    out = ks("tree", "alpha", "--db", db)
    head = out.split("\n\n", 1)[0]
    assert "run alpha · problem softmax · finished (rounds_done) · device cpu-interpreter" in head
    assert "9 kernels, 5 ideas, 2 rounds" in head
    assert "best 2.50× (k6, 800 µs)" in head
    assert "reference: eager 2 ms on cpu-interpreter, the median of 4 evaluations' side-by-side timings" in head
    assert "timings: CPU interpreter" in head            # CPU timings are labelled as such
    assert _body(out) == ALPHA_TREE


def _kernels_in(out: str) -> set[int]:
    return {int(m) for m in re.findall(r"\bk(\d+) (?:seed|b\d)", _body(out))}


def test_tree_status_filter_keeps_ancestors_for_context(db):
    out = ks("tree", "alpha", "--db", db, "--status", "failed")
    assert _kernels_in(out) == {1, 2, 3, 4, 5, 7, 8}    # failures + their ancestors
    assert "4 of 9 kernels match (--status failed); 3 ancestors shown dimmed for context" in out
    assert _kernels_in(ks("tree", "alpha", "--db", db, "--status", "queued")) == {1, 5, 9}
    assert _kernels_in(ks("tree", "alpha", "--db", db, "--status", "incorrect")) == {1, 3}


def test_tree_best_round_depth_filters(db):
    best = ks("tree", "alpha", "--db", db, "--best", "1")
    assert _kernels_in(best) == set(ALPHA_BEST_PATH)
    assert "k6 b0 ok 2.50× eager" in best and "← best" in best
    assert _kernels_in(ks("tree", "alpha", "--db", db, "--best", "2")) == {1, 2, 6}   # k2 is on k6's path
    assert _kernels_in(ks("tree", "alpha", "--db", db, "--best", "3")) == {1, 2, 5, 6}

    rnd = ks("tree", "alpha", "--db", db, "--round", "2")
    assert _kernels_in(rnd) == {1, 2, 5, 6, 7, 8, 9}
    assert "i5 r2 unroll the reduction" in rnd          # an idea of the round without branches still shows
    assert "i1 r1" in rnd and "i3 r2" in rnd

    shallow = ks("tree", "alpha", "--db", db, "--depth", "1")
    assert _kernels_in(shallow) == {1, 2, 3, 4, 5}
    assert "5 of 9 kernels shown (--depth 1)" in shallow
    assert "… 2 ideas below (raise --depth)" in shallow and "… 1 idea below (raise --depth)" in shallow
    assert _kernels_in(ks("tree", "alpha", "--db", db, "--depth", "0")) == {1}


def test_tree_rejects_an_unknown_status(db):
    out = ks("tree", "alpha", "--db", db, "--status", "great", code=2)
    assert "unknown --status 'great'" in out


def _walk(node: dict, seen: dict) -> None:
    if node["kind"] == "kernel":
        seen[node["id"]] = node
        for i in node["ideas"]:
            _walk(i, seen)
        for c in node["children"]:
            _walk(c, seen)
    else:
        for k in node["kernels"]:
            _walk(k, seen)


def test_tree_json_is_the_same_tree_with_stable_ids(db):
    out = ks("tree", "alpha", "--db", db, "--json")
    doc = json.loads(out)
    assert out == ks("tree", "alpha", "--db", db, "--json")      # stable
    assert doc["run"]["name"] == "alpha" and doc["run"]["id"] == 1
    assert doc["best_kernel_id"] == 6 and doc["best_path"] == ALPHA_BEST_PATH
    assert [r["id"] for r in doc["roots"]] == [1] and doc["ideas"] == []
    root = doc["roots"][0]
    assert [i["id"] for i in root["ideas"]] == [1, 2]
    assert [k["id"] for k in root["ideas"][0]["kernels"]] == [2, 3]
    k2 = root["ideas"][0]["kernels"][0]
    assert [i["id"] for i in k2["ideas"]] == [3, 5] and k2["ideas"][1]["kernels"] == []
    seen: dict[int, dict] = {}
    _walk(root, seen)
    assert {k: v["status"] for k, v in seen.items()} == ALPHA_STATUS
    assert {k: v["speedup"] for k, v in seen.items() if v["speedup"] is not None} == ALPHA_SPEEDUP
    assert {k: v["idea_id"] for k, v in seen.items() if v["idea_id"]} == ALPHA_IDEA_OF
    assert {k for k, v in seen.items() if v["on_best_path"]} == set(ALPHA_BEST_PATH)
    assert seen[6]["speedup_compile"] == 2.0 and seen[6]["roofline_fraction"] == 0.55
    assert seen[6]["timing_kind"] == "cpu-interpreter" and seen[6]["parent_kernel_id"] == 2
    assert seen[3]["reason"].startswith("max abs err")
    st = doc["stats"]
    assert (st["evaluations"], st["queued"], st["tokens"], st["by_status"]["ok"]) == (8, 1, 7000, 4)


def test_tree_json_applies_the_filters(db):
    doc = json.loads(ks("tree", "alpha", "--db", db, "--json", "--best", "1"))
    seen: dict[int, dict] = {}
    _walk(doc["roots"][0], seen)
    assert set(seen) == {1, 2, 6}
    assert {k for k, v in seen.items() if v["matched"]} == {6}
    assert doc["filters"] == {"best": 1} and doc["shown_kernels"] == 3


# -- show ----------------------------------------------------------------------------------------------------
def test_show_prints_idea_evaluation_lineage_and_code(db):
    out = ks("show", "k6", "--db", db)
    assert "kernel k6 · run alpha (softmax) · round 2 · branch 0 of idea i3" in out
    assert "keep the row in registers" in out and "Load the row once" in out
    assert "2.50× over eager · 2.00× over torch.compile" in out
    assert "800 µs  (its own time: the median of its ok timings)" in out
    assert "eager 2 ms, torch.compile 1.6 ms  (the run's figure on this device: the median of 4 evaluations'" in out
    assert "800 µs against eager 2 ms timed side by side (2.50×; not ranked by)" in out
    assert "55% of roofline · memory-bound" in out
    assert "CPU interpreter timing" in out
    assert "cases: 3" in out                                   # the stage detail
    lineage = out.split("lineage (starter → this kernel)")[1].split("\ncode")[0]
    order = [int(m) for m in re.findall(r"→ k(\d+)|seed k(\d+)", lineage) for m in m if m]
    assert order == ALPHA_BEST_PATH
    assert "← this kernel" in lineage.splitlines()[-1] or "← this kernel" in lineage
    code = out.split("code (triton, ")[1]
    for line in ("BLOCK=2048, num_warps=8", "@triton.jit", "class ModelNew(torch.nn.Module):"):
        assert line in code
    assert ks("show", "6", "--db", db) == out                 # 6 and k6 are the same kernel


def test_show_a_failure_and_a_queued_kernel(db):
    out = ks("show", "3", "--db", db)
    assert "incorrect" in out and "max abs err 3.1e-02 at case odd_1 (row 7)" in out
    assert "mismatch at [7, 1000]: got 0.031, want 0.0" in out     # the error text
    assert "mask=offs <= n_cols" in out
    queued = ks("show", "9", "--db", db)
    assert "queued: not evaluated yet" in queued and "i4 r2 “vectorized loads” → k9" in queued


def test_show_unknown_kernels(db):
    assert "no kernel 99 in" in ks("show", "99", "--db", db, code=2)
    assert "not a kernel id: 'abc'" in ks("show", "abc", "--db", db, code=2)


# -- diff ----------------------------------------------------------------------------------------------------
def test_diff_is_a_unified_diff(db):
    out = ks("diff", "k2", "6", "--db", db)
    lines = out.splitlines()
    assert lines[0] == "--- k2 (alpha, round 1, i1 “one pass with an online max”)"
    assert lines[1] == "+++ k6 (alpha, round 2, i3 “keep the row in registers”)"
    assert "-import torch  # variant: online max" in lines and "+import torch  # variant: registers" in lines
    assert "-        _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=2048, num_warps=4)" in lines
    assert "+        _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=2048, num_warps=8)" in lines
    assert sum(ln.startswith("@@") for ln in lines) == 2
    assert ks("diff", "2", "2", "--db", db).strip() == "k2 and k2 have identical code"
    assert "no kernel 77" in ks("diff", "2", "77", "--db", db, code=2)


# -- compare -------------------------------------------------------------------------------------------------
def test_compare_two_runs(db):
    out = ks("compare", "alpha", "beta", "--db", db)

    def row(label: str) -> list[str]:
        ln = next(x for x in out.splitlines() if x.startswith("│ " + label))
        return [c.strip() for c in ln.strip("│").split("│")]

    assert row("best speedup (eager)") == ["best speedup (eager)", "2.50× k6", "3.00× k21"]
    assert row("evaluations ")[1:] == ["8", "2"]
    assert row("  ok")[1:] == ["4", "2"] and row("  crash")[1:] == ["1", "0"]
    assert row("tokens in / out")[1:] == ["4.8k / 2.2k", "4.0k / 2.0k"]
    assert row("cost")[1:] == ["$0.0450 +1 unpriced", "$0.50"]
    assert row("wall time")[1:] == ["9m50s", "2m00s"]
    assert "timings not comparable" in out                # CPU interpreter vs GPU
    assert "no run named 'gamma'" in ks("compare", "alpha", "gamma", "--db", db, code=2)


# -- export-tsv ----------------------------------------------------------------------------------------------
def test_export_tsv_has_autokernels_columns(db, tmp_path):
    out = ks("export-tsv", "alpha", "--db", db)
    rows = list(csv.reader(io.StringIO(out), delimiter="\t"))
    assert tuple(rows[0]) == TSV_COLUMNS == (
        "experiment", "tag", "kernel_type", "throughput_tflops", "latency_us", "pct_peak", "speedup_vs_pytorch",
        "correctness", "peak_vram_mb", "description")
    body = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert [r["tag"] for r in body] == [f"r{r}-k{k}" for r, k in ((0, 1), (1, 2), (1, 3), (1, 4), (1, 5), (2, 6),
                                                                  (2, 7), (2, 8))]   # k9 is queued: no row
    assert [r["experiment"] for r in body] == [str(i) for i in range(1, 9)]
    k6 = body[5]
    assert (k6["kernel_type"], k6["throughput_tflops"], k6["latency_us"], k6["pct_peak"],
            k6["speedup_vs_pytorch"], k6["correctness"]) == ("softmax", "0.05", "800.000", "55.00", "2.5", "PASS")
    assert k6["description"] == "keep the row in registers [cpu-interpreter timing]"
    assert body[1]["peak_vram_mb"] == "12.5" and k6["peak_vram_mb"] == ""
    k3 = body[2]
    assert k3["correctness"] == "FAIL" and k3["latency_us"] == "" and k3["speedup_vs_pytorch"] == ""
    assert k3["description"].startswith("incorrect: max abs err 3.1e-02")
    target = tmp_path / "results.tsv"
    ks("export-tsv", "alpha", "--db", db, "-o", target)
    assert target.read_text() == out


# -- report --------------------------------------------------------------------------------------------------
def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="ks-code">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_report_is_one_self_contained_page(db, tmp_path):
    target = tmp_path / "sub" / "report.html"
    out = ks("report", "alpha", "--db", db, "-o", target)
    assert f"wrote {target}" in out
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    # the tree: every kernel and idea, best path open
    for k in ALPHA_STATUS:
        assert f'id="k{k}"' in page
    for i in range(1, 6):
        assert f'id="i{i}"' in page
    assert re.search(r'<details class="k s-ok path best" id="k6" open>', page)
    assert re.search(r'<details class="k s-incorrect" id="k3">', page)
    # the plots
    assert page.count('<svg class="plot"') == 2
    assert "best speedup vs evaluations" in page and "best speedup vs wall time" in page
    assert "2.50× k6</text>" in page
    # per-round statistics and cost
    rounds = re.search(r'<section id="rounds">.*?</section>', page, re.S).group(0)
    assert "<tr><td>1</td><td>2</td><td>4</td><td>4</td><td>2</td>" in rounds
    assert "<tr><td>2</td><td>3</td><td>4</td><td>3</td><td>1</td>" in rounds
    cost = re.search(r'<section id="cost">.*?</section>', page, re.S).group(0)
    assert "gpt-x" in cost and "unpriced" in cost and "$0.0450" in cost
    # each kernel's code and results travel inside the page
    data = _embedded(page)
    for kid, code in CODES.items():
        if kid in ALPHA_STATUS:
            h = data["k"][str(kid)]["h"]
            assert "\n".join(data["lines"][i] for i in data["codes"][h]) == code
    assert data["k"]["6"]["x"] == 2.5 and data["k"]["3"]["s"] == "incorrect"
    assert data["k"]["4"]["E"].startswith("Traceback")
    assert "mask=offs &lt; n_cols" in page                 # the best kernel's code, escaped, without JS too


def test_report_escapes_what_the_store_holds(tmp_path):
    db = build_known_store(tmp_path / "x.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE idea SET title = '<script>alert(1)</script> & co' WHERE id = 1")
    con.execute("UPDATE kernel SET code = code || '\n# </script><!-- ' WHERE id = 2")
    con.commit()
    con.close()
    ks("report", "alpha", "--db", db, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert page.count("</script>") == 2                   # only the page's own two script elements
    assert "# </script><!-- " in "\n".join(_embedded(page)["lines"])


# -- errors and read-only ------------------------------------------------------------------------------------
def test_missing_store_and_unknown_run_are_one_line_and_exit_2(db, tmp_path):
    for args in (["runs"], ["tree", "alpha"], ["show", "1"], ["diff", "1", "2"], ["compare", "a", "b"],
                 ["report", "alpha"], ["export-tsv", "alpha"]):
        out = ks(*args, "--db", tmp_path / "nope.db", code=2)
        assert out.strip() == f"error: no store at {tmp_path / 'nope.db'} (give one with --db)"
        assert not (tmp_path / "nope.db").exists()
    for args in (["tree", "zeta"], ["report", "zeta"], ["export-tsv", "zeta"]):
        out = ks(*args, "--db", db, code=2)
        assert out.strip() == f"error: no run named 'zeta' in {db} (runs: alpha, beta)"
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    assert "is not a kernelsearch store" in ks("runs", "--db", other, code=2)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert "error:" in ks("tree", "alpha", "--db", junk, code=2)


def test_the_default_store_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "no store at runs/kernelsearch.db" in ks("runs", code=2)
    build_known_store(tmp_path / "runs" / "kernelsearch.db")
    assert "alpha" in ks("runs")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_command_changes_the_store(db, tmp_path):
    before = _digest(db)
    mtime = db.stat().st_mtime_ns
    ks("runs", "--db", db)
    ks("tree", "alpha", "--db", db)
    ks("tree", "alpha", "--db", db, "--json", "--status", "ok")
    ks("show", "6", "--db", db)
    ks("diff", "1", "6", "--db", db)
    ks("compare", "alpha", "beta", "--db", db)
    ks("report", "alpha", "--db", db, "-o", tmp_path / "r.html")
    ks("export-tsv", "alpha", "--db", db)
    assert _digest(db) == before and db.stat().st_mtime_ns == mtime


def test_the_views_session_refuses_writes(db):
    with read_only_session(db) as s:
        assert s.execute(text("SELECT count(*) FROM kernel")).scalar() == 11
        with pytest.raises(OperationalError, match="readonly"):
            s.execute(text("DELETE FROM evaluation"))


def test_a_run_with_nothing_in_it_yet(tmp_path):
    from sqlmodel import Session

    from kernelsearch.store.database import open_store
    from kernelsearch.store.models import Run

    engine = open_store(tmp_path / "e.db")
    with Session(engine) as s:
        s.add(Run(name="empty", problem="softmax", config_json="{}"))
        s.commit()
    engine.dispose()
    db = tmp_path / "e.db"
    assert _body(ks("tree", "empty", "--db", db)).strip() == "(the run has no kernels yet)"
    doc = json.loads(ks("tree", "empty", "--db", db, "--json"))
    assert doc["roots"] == [] and doc["best_kernel_id"] is None and doc["stats"]["evaluations"] == 0
    assert ks("export-tsv", "empty", "--db", db).splitlines() == ["\t".join(TSV_COLUMNS)]
    ks("report", "empty", "--db", db, "-o", tmp_path / "e.html")
    page = (tmp_path / "e.html").read_text()
    assert "no evaluations yet" in page and "the run has no kernels yet" in page and "no correct kernel yet" in page
