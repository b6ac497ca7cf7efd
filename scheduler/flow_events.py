"""Events for what control flow decides in the loop: the tasks a branch or a short-circuit skipped (with which
choice skipped them), and each check of a sensor that asked to be tried again later (ledger/sensors.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.store import events
from scheduler.planner import RunsPlan


def record_skips(session: Session, plan: RunsPlan, *, now: datetime, actor: str, say: Callable[[str], None]) -> None:
    """One `task_skipped` event per task instance the plan marks for a reason other than its trigger rule."""
    rows: list[dict[str, Any]] = []
    for ti, st, run in plan.mark:
        why = plan.why.get(ti.id)
        if why is None:
            continue
        rows.append(dict(at=now, kind="task_skipped", actor=actor, dag_id=run.dag_id, run_id=run.id,
                         details={"task_id": ti.task_id, "ti_id": ti.id, "state": st.value, "reason": why}))
        say(f"{run.dag_id} run {run.id} task {ti.label}: {st.value} ({why})")
    events.record_many(session, rows)
