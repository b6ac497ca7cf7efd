"""The one door for state changes of loaded rows: a run or task instance object moves to a new state only through
these functions, which check the move against the table of allowed transitions (ledger/core/states.py) and write it
guarded on the state the object was loaded with. If another process changed the row since, nothing is written
and StaleState is raised (the caller's transaction is rolled back; a job reads again, a command says so).

`guarded` is the one guarded write: every state write goes through it, these functions' and the scheduler loop's
set-based ones (queueing tries, recording outcomes, marks by trigger rules, a run's start and end, runs a backfill
overrides, in ledger/store/tasks.py, loop.py and runs.py): it checks each move against the table, runs the
statement (guarded in its WHERE on the state each row had when read) and raises StaleState when fewer rows changed
than it meant to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, update
from sqlalchemy.orm import Session, object_session
from sqlalchemy.orm.attributes import set_committed_value

from ledger.core.backfill_cancel import RESTORABLE
from ledger.core.states import BackfillState, RunState, StaleState, TaskState, may_move
from ledger.models import Backfill, DagRun, TaskInstance
from ledger.store.hot import Hot

State = TaskState | RunState | BackfillState


def guarded(session: Session, statement: Hot | Executable, rows: Sequence[Mapping[str, Any]],
            moves: Iterable[tuple[object, str, State]], what: str) -> None:
    """The one guarded state write. `moves`: (what moves, the state it had when read, its new state), each checked
    against the transition table (ValueError: a bug, not a race); `statement` runs once per parameter row in
    `rows` (once with none when `rows` is empty) and is guarded on the read state in its WHERE: StaleState when
    it changed fewer rows than `rows` (or 1) says."""
    for subject, was, to in moves:
        if not may_move(was, to):
            raise ValueError(f"{subject}: {was} -> {to.value} is not an allowed transition")
    if isinstance(statement, Hot):
        expected, written = len(rows), statement.run(session, rows)
    else:
        expected = len(rows) or 1
        written = session.execute(statement, list(rows) or None).rowcount  # type: ignore[attr-defined]
    if written != expected:
        raise StaleState(what if expected == 1 else f"{what}: {expected - written} of {expected} changed meanwhile")


def move_task(ti: TaskInstance, to: TaskState, **values: Any) -> None:
    """Move a task instance loaded in a session to `to`, setting `values` (other columns) with it."""
    _write(TaskInstance, ti, to, values, f"task {ti.task_id!r} of run {ti.run_id}")


def move_run(run: DagRun, to: RunState, **values: Any) -> None:
    """Move a run loaded in a session to `to`, setting `values` (other columns) with it."""
    _write(DagRun, run, to, values, f"run {run.id}")


def move_backfill(row: Backfill, to: BackfillState, **values: Any) -> None:
    """Move a backfill loaded in a session to `to`, setting `values` (other columns) with it."""
    _write(Backfill, row, to, values, f"backfill {row.id}")


def restore_run(run: DagRun, to: str, **values: Any) -> None:
    """Bring an overridden run back as a live run in the finished state `to` it had before it was overridden: the
    one way out of `overridden`, taken only when a cancelled backfill's run that displaced it did not finish
    (ledger/core/backfill_cancel.py)."""
    if run.state != RunState.OVERRIDDEN.value or to not in RESTORABLE:
        raise ValueError(f"run {run.id}: {run.state} -> {to} is not a restore of an overridden run")
    _write(DagRun, run, RunState(to), values, f"run {run.id}", restore=True)


def _write(model: Any, row: Any, to: State, values: dict[str, Any], subject: str, restore: bool = False) -> None:
    session = object_session(row)
    assert session is not None, "a row moves within the transaction that loaded it"
    session.flush()  # (the object's other pending changes first: the guarded write is the last word)
    was, values = row.state, {"state": to.value, **values}
    guarded(session, update(model).where(model.id == row.id, model.state == was).values(**values)
            .execution_options(synchronize_session=False), [], [] if restore else [(subject, was, to)],
            f"{subject} changed from {was} while this command ran; try again")
    for name, value in values.items():
        set_committed_value(row, name, value)
