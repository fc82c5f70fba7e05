"""The live view of a running search (kernelsearch/views/live.py), fed by a real controller's events: the offline
provider and a real store, with the in-process pool of tests/search/fakes.py."""
from __future__ import annotations

import asyncio
import io
import re

from rich.console import Console

from kernelsearch.search.controller import Controller
from kernelsearch.store import queries as q
from kernelsearch.store import session_scope
from kernelsearch.views.live import LiveView
from tests.search.fakes import FakePool, config, new_run


def _run(tmp_path, console, budget=8):
    cfg = config(tmp_path, budgets={"evaluations": budget}, search={"rounds": 3})
    engine, rid = new_run(cfg.store, "live", cfg)
    view = LiveView(console, engine, rid, cfg.budgets)
    with view:   # as runner.py drives a run: the panel lives while the controller runs
        asyncio.run(Controller(cfg.search_setup(), engine, rid, FakePool(), events=view).run())
    return engine, rid, view


def test_plain_lines_when_not_a_terminal(tmp_path):
    out = io.StringIO()
    engine, rid, view = _run(tmp_path, Console(file=out, force_terminal=False, width=200))
    text = out.getvalue()
    assert "\x1b[" not in text                      # no panel, no escape codes: a log file reads plainly
    status = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("round ") and "evals" in ln]
    with session_scope(engine) as s:
        n = q.kernel_count(s, rid)
        best = q.best_kernels(s, rid, 1)[0]   # by its own time
        tok, _ = q.usage(s, rid)
    assert n == 8 and len(status) == 8              # one status line after each verdict
    done = [int(re.search(r"evals (\d+) done", ln).group(1)) for ln in status]
    assert done == sorted(done) and done[-1] == 8
    assert all(re.search(r"\d+ running, \d+ queued", ln) for ln in status)
    assert f"best {best.speedup:.3g}x (k{best.id})" in status[-1]
    assert f"{tok} tokens" in status[-1] and "left: 0 of 8 evals" in status[-1]
    assert "finished" in text


def test_rich_frame_shows_every_field(tmp_path):
    console = Console(record=True, force_terminal=True, width=120, file=io.StringIO())
    engine, rid, view = _run(tmp_path, console, budget=6)
    frame = Console(record=True, width=120, file=io.StringIO())
    frame.print(view.render())
    text = frame.export_text()
    with session_scope(engine) as s:
        best = q.best_kernels(s, rid, 1)[0]
    for field in ("round", "evaluations", "6 done, 0 running, 0 queued", f"k{best.id}", "tokens", "$",
                  "elapsed", "budget left", "0 of 6 evals"):
        assert field in text, (field, text)
    assert view.terminal and "\x1b[" in console.file.getvalue()   # drawn as a live panel on a terminal


def test_running_and_queued_follow_the_events(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 5})
    engine, rid = new_run(cfg.store, "counts", cfg)
    with session_scope(engine) as s:
        ids = [q.add_kernel(s, rid, code=f"# k{i}", code_hash=f"h{i}", language="triton") for i in range(3)]
    view = LiveView(Console(file=io.StringIO(), force_terminal=False), engine, rid, cfg.budgets)
    view("evaluating", {"kernel_id": ids[0]})
    assert (view.snap.done, view.snap.running, view.snap.queued) == (0, 1, 2)
    # a kernel refused before evaluation is answered without ever starting: nothing goes negative
    view("evaluated", {"kernel_id": ids[1], "status": "compile_error", "speedup": None, "reason": "infeasible"})
    assert (view.snap.running, view.snap.queued) == (1, 2) and view.snap.queued >= 0
    assert "2 of 5 evals" in view.status_line()


def test_a_re_timing_says_when_it_was_timed_side_by_side(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 5})
    engine, rid = new_run(cfg.store, "retimed", cfg)
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200), engine, rid, cfg.budgets)
    view("retiming", {"when": "round 1", "kernels": [4, 7], "n": 4})
    view("retimed", {"kernel_id": 4, "status": "ok", "time_ms": 1.25, "reason": None, "group": 3})
    view("retimed", {"kernel_id": 7, "status": "ok", "time_ms": 2.5, "reason": None, "group": None})
    lines = out.getvalue().splitlines()
    assert any("re-timing the finalists k4, k7 (round 1, 4 re-timings)" in ln for ln in lines), lines
    k4 = next(ln for ln in lines if ln.strip().startswith("k4"))
    k7 = next(ln for ln in lines if ln.strip().startswith("k7"))
    assert "1.25 ms (side by side with 2 others)" in k4 and "side by side" not in k7
