"""Queries of whole-model runs (the ModelRun and ModelProblem tables), apart from queries.py's run queries.

A store made before these tables existed has none of them until it is next opened for writing; the read-only views
ask `has_model_tables` first and show no model runs then.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import text
from sqlmodel import Session, select

from kernelsearch.store.models import ModelProblem, ModelRun, Run


def has_model_tables(session: Session) -> bool:
    names = {r[0] for r in session.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
    return {"modelrun", "modelproblem"} <= names


def model_run_of(session: Session, run_id: int) -> Optional[ModelRun]:
    if not has_model_tables(session):
        return None
    return session.exec(select(ModelRun).where(ModelRun.run_id == run_id)).first()


def model_problems(session: Session, model_run_id: int) -> list[ModelProblem]:
    """A model run's problems in plan order."""
    return list(session.exec(select(ModelProblem).where(ModelProblem.model_run_id == model_run_id)
                             .order_by(ModelProblem.order, ModelProblem.id)))


def children(session: Session) -> dict[int, list[int]]:
    """model run's Run id -> its child runs' Run ids (in plan order), for every model run of the store."""
    if not has_model_tables(session):
        return {}
    out: dict[int, list[int]] = {}
    stmt = (select(ModelRun.run_id, ModelProblem.child_run_id)
            .join(ModelProblem, ModelProblem.model_run_id == ModelRun.id)
            .where(ModelProblem.child_run_id.is_not(None)).order_by(ModelProblem.order))
    for parent, child in session.execute(stmt):
        out.setdefault(parent, []).append(child)
    return out


def child_run_ids(session: Session, run_id: int) -> list[int]:
    return children(session).get(run_id, [])


def run_named(session: Session, name: str) -> Optional[Run]:
    return session.exec(select(Run).where(Run.name == name)).first()
