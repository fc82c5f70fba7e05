"""A run stopped by SIGTERM (a job manager, `timeout`) is stopped as Ctrl-C stops it: marked `interrupted` in the
store, its processes gone, and `resume` goes on from it."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid` (by /proc's parent links)."""
    parents: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parents[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for c, pp in parents.items():
            if pp == p and c not in found:
                found.add(c)
                todo.append(c)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _evaluations(db: Path) -> int:
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT count(*) FROM evaluation").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow   # a real search on the CPU: beside the quick suite's timed retries it slowed one past its bound
def test_a_run_stopped_by_sigterm_is_interrupted_and_leaves_no_process(tmp_path):
    db = tmp_path / "runs.db"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kernelsearch", "run", str(ROOT / "configs" / "demo.yaml"),
                             "--name", "term", "--db", str(db)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _evaluations(db) < 1:   # stopped mid-run: something stored, its pool busy
            assert proc.poll() is None, proc.communicate()[0][-2000:]
            assert time.monotonic() < deadline, "no evaluation stored in 240 s"
            time.sleep(0.5)
        family = _children(proc.pid)
        assert family, "the run started no process"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    with sqlite3.connect(db) as con:
        status = con.execute("SELECT status FROM run WHERE name = 'term'").fetchone()[0]
    assert status == "interrupted", (status, out[-2000:])
    time.sleep(2)
    left = [p for p in family if _alive(p)]
    assert not left, f"processes of the run still alive after it stopped: {left}"
    again = subprocess.run([sys.executable, "-m", "kernelsearch", "runs", "--db", str(db)], cwd=tmp_path,
                           env={**env, "COLUMNS": "200"},   # a table narrower than its words cuts "interrupted"
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "interrupted" in again.stdout, again.stdout[-1000:] + again.stderr[-1000:]
