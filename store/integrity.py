"""Rows that kernelsearch cannot have written: found, reported, and never retried forever.

The store's columns are typed only loosely by SQLite: a kernel's code can be a blob or empty, an evaluation's
status any text, its detail_json anything. Such rows come from a damaged file or a hand edit. `damaged_rows`
finds them in a few queries per run (no row is loaded into Python), the views and `resume` report them, and
`settle_damaged_kernels` records a queued kernel whose code cannot be evaluated as a static failure, so a resume
does not send it to a worker (where it could not be sent as text) on every attempt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlalchemy import text
from sqlmodel import Session

from kernelsearch.store.models import Evaluation
from kernelsearch.store.queries import STATUSES
from kernelsearch.store.status import Status

_NOT_JSON_OBJECT = "NOT (CASE WHEN typeof({c}) = 'text' AND json_valid({c}) THEN json_type({c}) = 'object' ELSE 0 END)"
_NOT_JSON = "NOT (CASE WHEN typeof({c}) = 'text' THEN json_valid({c}) ELSE 0 END)"


@dataclass(frozen=True)
class DamagedRow:
    table: str                      # kernel | evaluation | idea | run
    row_id: int
    kernel_id: Optional[int]        # the kernel the row belongs to, where it belongs to one
    what: str                       # what is wrong, in a few words
    queued: bool = False            # a kernel with no evaluation: resume would send it to a worker

    def describe(self) -> str:
        where = f"k{self.kernel_id}" if self.kernel_id is not None else f"{self.table} {self.row_id}"
        return f"{where}: {self.what}"


def damaged_rows(session: Session, run_id: int) -> list[DamagedRow]:
    """Every row of the run whose content kernelsearch cannot have written, in table order."""
    rows: list[DamagedRow] = []
    r = {"run": run_id}
    for rid, in session.execute(text(
            f"SELECT id FROM run WHERE id = :run AND {_NOT_JSON.format(c='config_json')}"), r):
        rows.append(DamagedRow("run", rid, None, "its stored config_json is not JSON"))
    for iid, in session.execute(text(
            f"SELECT id FROM idea WHERE run_id = :run AND {_NOT_JSON.format(c='meta_json')}"), r):
        rows.append(DamagedRow("idea", iid, None, "meta_json is not JSON"))
    for kid, kind, queued in session.execute(text(
            "SELECT k.id, typeof(k.code), e.id IS NULL FROM kernel k "
            "LEFT JOIN evaluation e ON e.kernel_id = k.id AND e.purpose IS NULL "   # its verdict, not re-timings
            "WHERE k.run_id = :run AND (typeof(k.code) != 'text' OR length(trim(k.code)) = 0) ORDER BY k.id"), r):
        what = "code is empty" if kind == "text" else f"code is {'a blob' if kind == 'blob' else kind}, not text"
        rows.append(DamagedRow("kernel", kid, kid, what, queued=bool(queued)))
    allowed = ", ".join(f"'{s}'" for s in STATUSES)
    for eid, kid, status in session.execute(text(
            "SELECT e.id, e.kernel_id, e.status FROM evaluation e JOIN kernel k ON k.id = e.kernel_id "
            f"WHERE k.run_id = :run AND (typeof(e.status) != 'text' OR e.status NOT IN ({allowed})) ORDER BY e.id"),
            r):
        shown = repr(status if not isinstance(status, bytes) else bytes(status[:40]))[:60]
        rows.append(DamagedRow("evaluation", eid, kid, f"evaluation status {shown} is not one of "
                                                       f"{', '.join(STATUSES)}"))
    for eid, kid in session.execute(text(
            "SELECT e.id, e.kernel_id FROM evaluation e JOIN kernel k ON k.id = e.kernel_id "
            f"WHERE k.run_id = :run AND {_NOT_JSON_OBJECT.format(c='e.detail_json')} ORDER BY e.id"), r):
        rows.append(DamagedRow("evaluation", eid, kid, "evaluation detail_json is not JSON (an object)"))
    return rows


def shown_code(code: object) -> str:
    """A stored code value as text to show: the code itself, or a comment line saying what is wrong with it."""
    if isinstance(code, str) and code.strip():
        return code
    if isinstance(code, str):
        return "# damaged store row: code is empty\n"
    size = f" of {len(code)} bytes" if isinstance(code, (bytes, bytearray, memoryview)) else ""
    kind = "a blob" if isinstance(code, (bytes, bytearray, memoryview)) else type(code).__name__
    return f"# damaged store row: code is {kind}{size}, not text\n"


def summary(run_name: str, rows: list[DamagedRow], limit: int = 8) -> str:
    """One line: how many damaged rows the run has, and the first `limit` of them."""
    shown = "; ".join(r.describe() for r in rows[:limit])
    more = f"; and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"run {run_name!r} has {len(rows)} damaged row{'s' if len(rows) != 1 else ''}: {shown}{more}"


def settle_damaged_kernels(session: Session, rows: list[DamagedRow]) -> list[int]:
    """Record each queued kernel whose code is not text, or is empty, as a static compile_error saying why; it is
    then evaluated, and a resume does not retry it. Returns the kernel ids so recorded."""
    done = []
    for row in rows:
        if row.table == "kernel" and row.queued:
            session.add(Evaluation(kernel_id=row.kernel_id, status=Status.compile_error.value, stage="static",
                                   reason=f"damaged store row: {row.what}; not evaluated"))
            done.append(row.kernel_id)
    session.flush()
    return done
