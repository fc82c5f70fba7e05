"""A store written before a column was added (store/database.py ADDED_COLUMNS) is an older store, not a damaged
one: read-only views see the new column as NULL without the file changing, and opening it for writing adds the
column with every old row kept."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.store.database import ADDED_COLUMNS, RELAXED_INDEXES, open_store
from kernelsearch.store.models import Evaluation
from tests.views.known_store import build_known_store


def _older_store(tmp_path: Path) -> tuple[Path, list]:
    """The known store with every added column dropped, as a store of the version before them: its index on a
    kernel's evaluations unique (one evaluation a kernel, before re-timings), and no index on `purpose`."""
    path = build_known_store(tmp_path / "old.db")
    con = sqlite3.connect(path)
    con.execute("DROP INDEX ux_evaluation_verdict")
    for name in RELAXED_INDEXES:
        con.execute(f"DROP INDEX {name}")
    con.execute("CREATE UNIQUE INDEX ix_evaluation_kernel_id ON evaluation (kernel_id)")
    for table, cols in ADDED_COLUMNS.items():
        for col in cols:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
    con.commit()
    rows = con.execute("SELECT id, kernel_id, status, speedup FROM evaluation ORDER BY id").fetchall()
    con.close()
    return path, rows


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_older_store_is_read_as_it_is_and_upgraded_when_opened_for_writing(tmp_path):
    path, rows = _older_store(tmp_path)
    assert rows
    before = _digest(path)
    engine = open_store(path, readonly=True)
    with Session(engine) as s:
        evs = s.exec(select(Evaluation).order_by(Evaluation.id)).all()
    engine.dispose()
    assert [(e.id, e.kernel_id, e.status, e.speedup) for e in evs] == rows
    assert all(e.torch_ops is None and e.purpose is None for e in evs)   # every old row is its kernel's verdict
    res = CliRunner().invoke(app, ["runs", "--db", str(path)])   # a view over the older store
    assert res.exit_code == 0, res.output
    assert _digest(path) == before   # nothing written by reading

    engine = open_store(path)
    with Session(engine) as s:
        ev = s.exec(select(Evaluation).order_by(Evaluation.id)).first()
        ev.torch_ops = "matmul"
        s.add(ev)
        s.commit()
    engine.dispose()
    con = sqlite3.connect(path)
    try:
        got = con.execute("SELECT id, kernel_id, status, speedup FROM evaluation ORDER BY id").fetchall()
        ops = [r[0] for r in con.execute("SELECT torch_ops FROM evaluation ORDER BY id")]
    finally:
        con.close()
    assert got == rows and ops[0] == "matmul" and all(o is None for o in ops[1:])


def test_an_older_store_opened_for_writing_takes_retimings_and_keeps_one_verdict_a_kernel(tmp_path):
    path, rows = _older_store(tmp_path)
    engine = open_store(path)
    with Session(engine) as s:   # a re-timing of k6 beside its verdict: the old unique index is gone
        s.add(Evaluation(kernel_id=6, status="ok", time_ms=0.7, ref_time_ms=2.1, purpose="retime"))
        s.commit()
    with Session(engine) as s:   # a second verdict is still refused, now by the partial index
        s.add(Evaluation(kernel_id=6, status="ok", time_ms=0.7))
        with pytest.raises(IntegrityError):
            s.commit()
    engine.dispose()
    con = sqlite3.connect(path)
    try:
        unique = {r[1]: r[2] for r in con.execute("PRAGMA index_list(evaluation)")}
        n = con.execute("SELECT count(*) FROM evaluation WHERE kernel_id = 6").fetchone()[0]
    finally:
        con.close()
    assert unique == {"ix_evaluation_kernel_id": 0, "ux_evaluation_verdict": 1} and n == 2
