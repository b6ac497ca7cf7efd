"""The one door for state changes of loaded rows: a run or task instance object moves to a new state only through
these functions, which check the move against the table of allowed transitions (ledger/core/states.py) and write it
guarded on the state the object was loaded with. If another process changed the row since, nothing is written
and StaleState is raised (the caller's transaction is rolled back; a job reads again, a command says so).

The scheduler loop's own set-based writes (queueing tries, recording outcomes, marks by trigger rules, a run's
start and end) are guarded the same way in ledger/store/tasks.py and ledger/store/loop.py.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import object_session
from sqlalchemy.orm.attributes import set_committed_value

from ledger.core.backfill_cancel import RESTORABLE
from ledger.core.states import RunState, StaleState, TaskState, run_may_move, task_may_move
from ledger.models import DagRun, TaskInstance


def move_task(ti: TaskInstance, to: TaskState, **values: Any) -> None:
    """Move a task instance loaded in a session to `to`, setting `values` (other columns) with it."""
    was = ti.state
    if not task_may_move(was, to):
        raise ValueError(f"task instance {ti.id}: {was} -> {to.value} is not an allowed transition")
    _write(TaskInstance, ti, was, {"state": to.value, **values},
           f"task {ti.task_id!r} of run {ti.run_id} changed from {was} while this command ran; try again")


def move_run(run: DagRun, to: RunState, **values: Any) -> None:
    """Move a run loaded in a session to `to`, setting `values` (other columns) with it."""
    was = run.state
    if not run_may_move(was, to):
        raise ValueError(f"run {run.id}: {was} -> {to.value} is not an allowed transition")
    _write(DagRun, run, was, {"state": to.value, **values},
           f"run {run.id} changed from {was} while this command ran; try again")


def restore_run(run: DagRun, to: str, **values: Any) -> None:
    """Bring an overridden run back as a live run in the finished state `to` it had before it was overridden: the
    one way out of `overridden`, taken only when a cancelled backfill's run that displaced it did not finish
    (ledger/core/backfill_cancel.py)."""
    if run.state != RunState.OVERRIDDEN.value or to not in RESTORABLE:
        raise ValueError(f"run {run.id}: {run.state} -> {to} is not a restore of an overridden run")
    _write(DagRun, run, run.state, {"state": to, **values},
           f"run {run.id} changed from {run.state} while this command ran; try again")


def _write(model: Any, row: Any, was: str, values: dict[str, Any], stale: str) -> None:
    session = object_session(row)
    assert session is not None, "a row moves within the transaction that loaded it"
    session.flush()  # (the object's other pending changes first: the guarded write is the last word)
    done = session.execute(update(model).where(model.id == row.id, model.state == was).values(**values)
                           .execution_options(synchronize_session=False))
    if done.rowcount != 1:  # type: ignore[attr-defined]
        raise StaleState(stale)
    for name, value in values.items():
        set_committed_value(row, name, value)
