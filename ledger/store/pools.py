"""Pools: named slot counts shared by task instances across DAGs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.core.states import ACTIVE_TASK_STATES
from ledger.models import Pool, TaskInstance


def pool_rows(session: Session) -> list[dict[str, Any]]:
    """Every pool with its slots and how many of them the task instances queued or running now take."""
    in_use = (select(TaskInstance.pool, func.sum(TaskInstance.pool_slots))
              .where(TaskInstance.state.in_(ACTIVE_TASK_STATES)).group_by(TaskInstance.pool))
    used = dict(session.execute(in_use).tuples().all())
    return [{"name": p.name, "slots": p.slots, "used": used.get(p.name, 0), "description": p.description}
            for p in session.scalars(select(Pool).order_by(Pool.name))]


def set_pool(session: Session, name: str, slots: int, description: str) -> None:
    pool = session.get(Pool, name)
    if pool is None:
        session.add(Pool(name=name, slots=slots, description=description))
    else:
        pool.slots, pool.description = slots, description or pool.description


def delete_pool(session: Session, name: str) -> bool:
    """False when there is no such pool."""
    pool = session.get(Pool, name)
    if pool is None:
        return False
    session.delete(pool)
    return True
