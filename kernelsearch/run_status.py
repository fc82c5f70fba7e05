"""The store as the commands that make many runs (`kernelsearch bench`, `kernelsearch experiment`) read it: opened
read-only, and a run's status by name. Each command passes its own error class, so a file that is not a store is
that command's one-line error."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from sqlmodel import select

from kernelsearch.store import Run, open_store, session_scope
from kernelsearch.store.database import StoreError


def open_read_only(store: Path, error: type[Exception]):
    """The store's engine, read-only; a file that is not a store raises `error` with the store's message."""
    try:
        return open_store(store, readonly=True)
    except StoreError as err:
        raise error(str(err)) from None


def run_status(store: Path, name: str, error: type[Exception]) -> Optional[str]:
    """The status of the run named `name`; None when there is no such run, or no store yet."""
    if not store.exists():
        return None
    engine = open_read_only(store, error)
    try:
        with session_scope(engine) as s:
            run = s.exec(select(Run).where(Run.name == name)).first()
            return run.status if run else None
    finally:
        engine.dispose()
