"""Events for what control flow decides in the loop: the tasks a branch or a short-circuit skipped (with which
choice skipped them), and each check of a sensor that asked to be tried again later (ledger/sdk/sensors.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.outcomes import Outcome
from ledger.core.states import TaskState
from ledger.scheduler.loop.planner import RunsPlan
from ledger.scheduler.runtime.try_outcome import NO_RETRY_PREFIX
from ledger.scheduler.runtime.try_report import TryReport
from ledger.sdk.sensors import SENSOR_KEY, reschedule_at
from ledger.store import events


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


def sensor_outcome(state: TaskState, reason: str | None, left: TryReport | None) -> dict[str, Any]:
    """What a sensor's try adds to its outcome: when a rescheduled one is to be checked again (from the record its
    try left), and whether a failure spends no retry (its timeout, FailWithoutRetry)."""
    out: dict[str, Any] = {}
    if state == TaskState.UP_FOR_RESCHEDULE and left is not None:
        out["reschedule_at"] = reschedule_at(dict(left.pushed).get(SENSOR_KEY))
    if state == TaskState.FAILED and (reason or "").startswith(NO_RETRY_PREFIX):
        out["no_retry"] = True
    return out


def sensor_checked(dag_id: str, run_id: int, label: str, outcome: Outcome, state: TaskState,
                   pushed: list[tuple[str, Any]], *, now: datetime, actor: str) -> list[dict[str, Any]]:
    """The `sensor_checked` events of a sensor's try (none when it left no sensor record), one per check: in poke
    mode first the checks that found the condition not met (state `waiting`, at most the last 100), then its
    last check, with the try's state, how many checks have been made since the first, and the next check."""
    record = dict(pushed).get(SENSOR_KEY)
    if not isinstance(record, dict):
        return []
    base = {"task_id": label, "ti_id": outcome.ti_id, "try_number": outcome.try_number,
            "first_check": record.get("first_check"), "mode": record.get("mode")}
    found = record.get("checks")
    checks = found if isinstance(found, int) else 0
    earlier = [t for t in record.get("not_met_at") or [] if isinstance(t, str)]
    rows = [dict(at=now, kind="sensor_checked", actor=actor, dag_id=dag_id, run_id=run_id,
                 details={**base, "state": "waiting", "checks": checks - len(earlier) + i, "checked_at": at})
            for i, at in enumerate(earlier)]
    rows.append(dict(at=now, kind="sensor_checked", actor=actor, dag_id=dag_id, run_id=run_id,
                     details={**base, "state": state.value, "checks": checks,
                              **({"next_check": record["next_check"]} if record.get("next_check") else {})}))
    return rows
