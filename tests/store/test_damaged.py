"""Opening a store that is not one, or is a damaged one: one clear StoreError saying which, and nothing written.

The damaged stores are made from a real one (tests/views/known_store.py): truncated halfway, a table dropped, a
page overwritten. Two processes creating the same new store at once both get a valid store.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlmodel import Session, select

from kernelsearch.store.database import StoreError, open_store
from kernelsearch.store.models import Evaluation, Kernel, Run
from tests.views.known_store import build_known_store

CORE = {"run", "idea", "kernel", "evaluation", "llmcall"}


@pytest.fixture(scope="module")
def known(tmp_path_factory) -> Path:
    return build_known_store(tmp_path_factory.mktemp("damaged") / "known.db")


def _copy(known: Path, tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copy(known, dst)
    return dst


def _tables(path: Path) -> set[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()


def _refused(path: Path, **kw) -> str:
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        open_store(path, **kw)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg, msg
    assert path.read_bytes() == before   # nothing was written to it
    return msg


@pytest.mark.parametrize("readonly", [False, True])
def test_random_bytes_are_not_a_sqlite_file(tmp_path, readonly):
    p = tmp_path / "rand.db"
    p.write_bytes(os.urandom(20000))
    assert "is not a SQLite file" in _refused(p, readonly=readonly)


@pytest.mark.parametrize("readonly", [False, True])
def test_a_real_store_truncated_halfway_is_damaged_not_foreign(known, tmp_path, readonly):
    p = tmp_path / "trunc.db"
    data = known.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    msg = _refused(p, readonly=readonly)
    assert "damaged" in msg and "truncated" in msg and f"{len(data) // 2} bytes" in msg, msg
    assert "not a kernelsearch store" not in msg


@pytest.mark.parametrize("readonly", [False, True])
def test_a_real_store_with_a_table_dropped_is_damaged_and_not_recreated(known, tmp_path, readonly):
    p = _copy(known, tmp_path, "drop.db")
    con = sqlite3.connect(p)
    con.execute("DROP TABLE evaluation")
    con.commit()
    con.close()
    msg = _refused(p, readonly=readonly)
    assert "damaged kernelsearch store" in msg and "table evaluation is missing" in msg, msg
    assert "not a kernelsearch store" not in msg
    assert "evaluation" not in _tables(p)   # not silently recreated empty (a resume would redo every kernel)


def test_a_real_store_with_a_column_dropped_is_damaged(known, tmp_path):
    p = _copy(known, tmp_path, "col.db")
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE evaluation DROP COLUMN detail_json")
    con.commit()
    con.close()
    msg = _refused(p)
    assert "damaged kernelsearch store" in msg and "evaluation" in msg and "detail_json" in msg, msg


def test_a_foreign_sqlite_file_is_not_a_kernelsearch_store(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    msg = _refused(p)
    assert "is not a kernelsearch store" in msg and "t" in msg, msg
    assert _tables(p) == {"t"}   # no kernelsearch tables added to someone else's database


def test_an_overwritten_page_is_found_by_verify(known, tmp_path):
    p = _copy(known, tmp_path, "page.db")
    con = sqlite3.connect(p)
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name='kernel'").fetchone()
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(p.read_bytes())
    data[(root - 1) * page: root * page] = b"\xa5" * page   # the kernel table's root page: garbage
    p.write_bytes(bytes(data))
    open_store(p, readonly=True).dispose()   # the header and the schema still read: a cheap open succeeds
    msg = _refused(p, verify=True)
    assert "damaged" in msg and "quick_check" in msg, msg


def test_empty_file_and_new_path_become_stores(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    for p in (empty, tmp_path / "sub" / "new.db"):
        open_store(p, verify=True).dispose()
        assert CORE <= _tables(p)
    e = open_store(empty)   # opening again is a no-op, not an error
    with Session(e) as s:
        assert s.exec(select(Run)).all() == []
    e.dispose()


def test_a_real_store_opens_and_verifies(known, tmp_path):
    p = _copy(known, tmp_path, "ok.db")
    e = open_store(p, verify=True)
    with Session(e) as s:
        assert len(s.exec(select(Kernel)).all()) == 11
        assert len(s.exec(select(Evaluation)).all()) == 10
    e.dispose()


def _open_and_write(path: str, name: str, barrier) -> str:
    try:
        barrier.wait()
        e = open_store(path)
        with Session(e) as s:
            s.add(Run(name=name, problem="softmax", config_json="{}"))
            s.commit()
        e.dispose()
        return "ok"
    except BaseException as err:   # noqa: BLE001 - the test reports whatever it was
        return f"{type(err).__name__}: {err}"


def test_processes_creating_one_new_store_at_once_all_succeed(tmp_path):
    ctx = mp.get_context("fork")
    for trial in range(5):
        path = str(tmp_path / f"race{trial}.db")
        n = 4
        barrier = ctx.Manager().Barrier(n)
        with ctx.Pool(n) as pool:
            results = pool.starmap(_open_and_write, [(path, f"r{i}", barrier) for i in range(n)])
        assert results == ["ok"] * n, results
        e = open_store(path, verify=True)
        with Session(e) as s:
            assert sorted(r.name for r in s.exec(select(Run)).all()) == [f"r{i}" for i in range(n)]
        e.dispose()
