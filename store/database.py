"""The SQLite engine: WAL mode, foreign keys on, one writer (the controller).

Opening a file that is not a store is a `StoreError` of one line saying which it is: not SQLite at all, a SQLite
database of someone else's (no kernelsearch table), or a kernelsearch store that is damaged (truncated, a table or
column missing, pages that SQLite's quick_check finds broken). Nothing is written to such a file: in particular a
missing table is not recreated empty, which would make a resume redo every kernel. A new store's tables are
created in one exclusive transaction, so processes creating the same new store at once all get a valid one.
"""
from __future__ import annotations

import sqlite3
import time
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlmodel import Session, SQLModel, create_engine

DEFAULT_DB = Path("runs/kernelsearch.db")   # where a run is stored when neither the config nor --db names a file


class StoreError(Exception):
    """The file cannot be used as a store; the one-line message names the file and says what is wrong."""


SQLITE_MAGIC = b"SQLite format 3\x00"
CORE_TABLES = ("run", "idea", "kernel", "evaluation", "llmcall")   # docs/design.md section 5: a store has them all
# columns added after stores were first written, all nullable: a store without them is an older one, not a damaged
# one. Opened for writing it gets them (ALTER TABLE ADD COLUMN, NULL in every old row); opened read-only, where the
# file cannot change, each such table is shadowed for that connection by a TEMP view that adds them as NULL.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"evaluation": ("torch_ops", "purpose")}
# indexes that were unique in older stores and are no longer: opened for writing, a store whose index of that name is
# still unique has it dropped and made again as the models say. ix_evaluation_kernel_id: a kernel's re-timings are
# rows of its own (one verdict a kernel is then ux_evaluation_verdict, unique where purpose IS NULL).
RELAXED_INDEXES = ("ix_evaluation_kernel_id",)
BUSY_TIMEOUT_S = 30


def open_store(path: str | Path, *, readonly: bool = False, verify: bool = False) -> Engine:
    """Open (creating if needed, unless `readonly`) the SQLite store at `path`. `sqlite://` gives an in-memory
    store. Raises StoreError for a file that is not a kernelsearch store or is a damaged one; `verify` also runs
    SQLite's quick_check over every page (a second or so per GB), for callers about to write to the store."""
    if str(path) == "sqlite://":
        url = "sqlite://"
    else:
        p = Path(path)
        if readonly:   # opened read-only by SQLite itself: a view can change nothing, not even the journal mode
            if not p.exists():
                raise FileNotFoundError(f"no store at {p}")
            url = f"sqlite:///file:{p.resolve()}?mode=ro&uri=true"
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{p}"
        _check_header(p)
        older = _prepare(p, readonly=readonly, verify=verify)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S})
    shadows = [_shadow_view(t, cols) for t, cols in older.items()] if url != "sqlite://" and readonly else []

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        if url != "sqlite://" and not readonly:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        for ddl in shadows:
            cur.execute(ddl)
        cur.close()

    if url == "sqlite://":
        SQLModel.metadata.create_all(engine)
    return engine


def _check_header(p: Path) -> None:
    """The cheap checks on the file's first 100 bytes: SQLite's magic string, and a size no smaller than the
    header says (a truncated copy). An empty or absent file is a new store."""
    if not p.exists() or p.stat().st_size == 0:
        return
    size = p.stat().st_size
    try:
        with open(p, "rb") as f:
            head = f.read(100)
    except OSError as err:
        raise StoreError(f"{p} cannot be read: {err.strerror or err}") from None
    if not head.startswith(SQLITE_MAGIC):
        raise StoreError(f"{p} is not a SQLite file (it does not start with SQLite's header): not a kernelsearch "
                         "store, or one damaged past reading")
    if len(head) < 100:
        raise StoreError(f"{p} is a damaged store: {size} bytes, shorter than SQLite's 100-byte header (truncated)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size_valid = head[24:28] == head[92:96]   # the header's page count is kept only when these two agree
    wal = p.with_name(p.name + "-wal")
    writing = wal.exists() and wal.stat().st_size > 0   # a checkpoint in progress may grow the file after its header
    if size_valid and pages and size < pages * page_size and not writing:
        raise StoreError(f"{p} is a damaged store: the file is {size} bytes but its header says {pages} pages of "
                         f"{page_size} bytes ({pages * page_size}): truncated")


def _shadow_view(table: str, missing: list[str]) -> str:
    """A TEMP view named like `table` (temp is searched before main) with the columns it lacks as NULL."""
    extra = ", ".join(f'NULL AS "{c}"' for c in missing)
    return f'CREATE TEMP VIEW IF NOT EXISTS "{table}" AS SELECT *, {extra} FROM main."{table}"'


def _older(tables: dict[str, set[str]]) -> dict[str, list[str]]:
    """The ADDED_COLUMNS an existing store's tables lack."""
    out = {}
    for table, cols in ADDED_COLUMNS.items():
        missing = [c for c in cols if table in tables and c not in tables[table]]
        if missing:
            out[table] = missing
    return out


def _connect(p: Path, readonly: bool) -> sqlite3.Connection:
    if readonly:
        return sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    return sqlite3.connect(p, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _schema(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table of the database with its column names."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: {r[1] for r in con.execute(f'PRAGMA table_info("{n}")')} for n in names}


def _check_schema(p: Path, tables: dict[str, set[str]]) -> None:
    """A store with none of the tables is new; with some but not all, or a column missing, it is damaged."""
    have = [t for t in CORE_TABLES if t in tables]
    if not have:
        if tables:
            raise StoreError(f"{p} is not a kernelsearch store: it holds tables {', '.join(sorted(tables))}, none "
                             f"of {', '.join(CORE_TABLES)}")
        return
    missing = [t for t in CORE_TABLES if t not in tables]
    if missing:
        raise StoreError(f"{p} is a damaged kernelsearch store: table{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} {'are' if len(missing) > 1 else 'is'} missing (it has "
                         f"{', '.join(have)})")
    for name, table in SQLModel.metadata.tables.items():
        added = ADDED_COLUMNS.get(name, ())
        lacking = sorted(c.name for c in table.columns if name in tables and c.name not in tables[name]
                         and c.name not in added)
        if lacking:
            raise StoreError(f"{p} is a damaged kernelsearch store (or one written by another version): table "
                             f"{name} lacks column{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}")


def _prepare(p: Path, *, readonly: bool, verify: bool) -> dict[str, list[str]]:
    """`_prepare_once`, again while SQLite answers "locked" without waiting (it does so at once, not after its busy
    timeout, where waiting could deadlock: a BEGIN IMMEDIATE or the switch to WAL while another process is making the
    same new store; seen 1 time in 20 with 4 processes), up to BUSY_TIMEOUT_S in all."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.01
    while True:
        try:
            return _prepare_once(p, readonly=readonly, verify=verify)
        except _Locked as err:
            if time.monotonic() + delay > deadline:
                raise StoreError(f"{p} is locked by another process (waited {BUSY_TIMEOUT_S} s): {err}") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class _Locked(Exception):
    pass


def _prepare_once(p: Path, *, readonly: bool, verify: bool) -> dict[str, list[str]]:
    """Check the store's tables (and, with `verify`, its pages); for a writable store create what is missing, all
    in one exclusive transaction: of processes opening a new store at once, one creates the tables and the
    others, waiting on the lock, find them made. Returns the ADDED_COLUMNS a read-only store lacks."""
    older: dict[str, list[str]] = {}
    try:
        with closing(_connect(p, readonly)) as con:
            if readonly:
                tables = _schema(con)
                _check_schema(p, tables)
                older = _older(tables)
            else:
                con.execute("BEGIN IMMEDIATE")
                try:
                    tables = _schema(con)
                    _check_schema(p, tables)
                    _create_missing(con, tables)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("PRAGMA journal_mode=WAL")   # only once the file is known to be a store
            if verify:
                _quick_check(p, con)
        return older
    except sqlite3.DatabaseError as err:
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            raise _Locked(str(err)) from None
        raise StoreError(f"{p} is a damaged store: SQLite says {err}") from None


def _quick_check(p: Path, con: sqlite3.Connection) -> None:
    try:
        problems = [r[0] for r in con.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{p} is a damaged store: SQLite's quick_check stops at: {err}") from None
    if problems != ["ok"]:
        raise StoreError(f"{p} is a damaged store: SQLite's quick_check finds {len(problems)}"
                         f"{'+' if len(problems) == 5 else ''} problem(s), the first: {problems[0]}")


def _create_missing(con: sqlite3.Connection, tables: dict[str, set[str]]) -> None:
    """The DDL of every table and index of the models not yet in the database, run on `con` (inside its
    transaction, which create_all could not share)."""
    dialect = sqlite_dialect.dialect()
    for table in SQLModel.metadata.tables.values():   # SQLite resolves foreign keys on use: any order
        if table.name not in tables:
            con.execute(str(CreateTable(table).compile(dialect=dialect)))
        for name in _older(tables).get(table.name, []):   # an older store: its new nullable columns, NULL in old rows
            col = table.columns[name]
            con.execute(f'ALTER TABLE "{table.name}" ADD COLUMN "{name}" {col.type.compile(dialect=dialect)}')
        if table.name in tables:
            unique = {r[1] for r in con.execute(f'PRAGMA index_list("{table.name}")') if r[2]}
            for index in table.indexes:   # made again below, as the models say
                if index.name in RELAXED_INDEXES and index.name in unique and not index.unique:
                    con.execute(f'DROP INDEX "{index.name}"')
        for index in table.indexes:
            con.execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work, committed at the end: a finished step is on disk before the next begins."""
    with Session(engine, expire_on_commit=False) as s:
        yield s
        s.commit()
