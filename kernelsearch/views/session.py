"""Opening the store for the views: read-only, with a clear one-line error (exit code 2) for a missing store, a
file that is not a store or is a damaged one, an unknown run or a malformed kernel id; and the one-line warning
for a run with damaged rows (store/integrity.py), which the views show as they are rather than fail on."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, NoReturn

import typer
from sqlalchemy import event, select
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session

from kernelsearch.store import queries as q
from kernelsearch.store.database import StoreError, open_store
from kernelsearch.store.integrity import DamagedRow, damaged_rows, summary
from kernelsearch.store.models import Evaluation, Run

DbOpt = Annotated[Path, typer.Option("--db", help="The SQLite store to read.", show_default=True)]


def fail(msg: str) -> NoReturn:
    """One line on stderr and exit code 2."""
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


@contextmanager
def read_only_session(db: Path) -> Iterator[Session]:
    """A read-only session on the store at `db`; a missing or foreign file is a clear error (exit 2)."""
    if not db.is_file():
        fail(f"no store at {db} (give one with --db)")
    try:
        engine = open_store(db, readonly=True)
    except StoreError as e:
        fail(str(e))
    except DatabaseError as e:
        fail(f"{db} is not a readable SQLite store: {e.orig if hasattr(e, 'orig') else e}")

    @event.listens_for(engine, "connect")
    def _query_only(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA query_only=ON")   # any write through this engine is an error
        cur.close()

    try:
        with Session(engine) as session:
            try:
                session.execute(select(Run.id).limit(1)).all()
                session.execute(select(Evaluation.id).limit(1)).all()
            except DatabaseError:
                fail(f"{db} is not a kernelsearch store (no run/evaluation tables)")
            try:
                yield session
            except DatabaseError as e:   # a page found broken only when a query reached it
                orig = getattr(e, "orig", None) or e
                fail(f"{db} is a damaged store: SQLite says {str(orig).splitlines()[0] if str(orig) else orig!r}")
    finally:
        engine.dispose()


def warn_damaged(session: Session, run: Run, kernel_id: int | None = None) -> list[DamagedRow]:
    """One warning line on stderr when the run (or, given `kernel_id`, that kernel) has damaged rows."""
    rows = damaged_rows(session, run.id)
    if kernel_id is not None:
        rows = [r for r in rows if r.kernel_id == kernel_id]
    if rows:
        typer.echo(f"warning: {summary(run.name, rows)}", err=True)
    return rows


def find_run(session: Session, name: str, db: Path) -> Run:
    """The run named `name`; an unknown name is an error that lists the store's runs."""
    run = q.get_run(session, name)
    if run is None:
        names = [r.name for r in q.list_runs(session)]
        known = f"runs: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}" if names else "it has no runs"
        fail(f"no run named {name!r} in {db} ({known})")
    return run


def parse_kernel_id(text: str) -> int:
    """`12` or `k12` (as the tree prints it)."""
    t = text.strip()
    t = t[1:] if t[:1] in ("k", "K") else t
    if not t.isdigit():
        fail(f"not a kernel id: {text!r} (expected a number such as 12 or k12)")
    return int(t)
