"""The SQLite engine: WAL mode, foreign keys on, one writer (the controller)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

DEFAULT_DB = Path("runs/kernelsearch.db")   # where a run is stored when neither the config nor --db names a file


def open_store(path: str | Path, *, readonly: bool = False) -> Engine:
    """Open (creating if needed) the SQLite store at `path`. `sqlite://` gives an in-memory store."""
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
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        if url != "sqlite://" and not readonly:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    if not readonly:
        SQLModel.metadata.create_all(engine)
    return engine


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work, committed at the end: a finished step is on disk before the next begins."""
    with Session(engine, expire_on_commit=False) as s:
        yield s
        s.commit()
