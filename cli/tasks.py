"""`ledger tasks logs|clear`."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from sqlalchemy import select
from sqlalchemy.orm import Session

from cli.env import open_env
from cli.options import DagId
from ledger.errors import InvalidInput, TimelineConflict
from ledger.models import DagRun, TaskInstance
from ledger.states import FINISHED_TASK_STATES, RunState, TaskState
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import runs as run_store

app = typer.Typer(help="Inspect and re-run task instances.", no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)

RunArg = Annotated[str, typer.Argument(help="The run id.", show_default=False)]


def _run_of(session: Session, dag_id: str, run: str) -> DagRun:
    r = run_store.get(session, run)
    if r.dag_id != dag_id:
        raise InvalidInput(f"run {r.id} belongs to DAG {r.dag_id!r}, not {dag_id!r}")
    return r


@app.command()
def logs(dag_id: DagId, run: RunArg, task_id: Annotated[str, typer.Argument(help="The task id.")],
         try_number: Annotated[int | None, typer.Option("--try", min=1, help="Which try (default: the latest).")]
         = None) -> None:
    """Print the log of one try of a task instance."""
    from scheduler.job import log_path

    env = open_env()
    with env.transaction() as session:
        r = _run_of(session, dag_id, run)
        ti = session.scalar(select(TaskInstance).where(TaskInstance.run_id == r.id, TaskInstance.task_id == task_id))
        if ti is None:
            raise InvalidInput(f"run {r.id} has no task {task_id!r}")
        latest = ti.try_number
    if latest == 0:
        raise InvalidInput(f"task {task_id!r} of run {r.id} has not run yet")
    n = try_number or latest
    if n > latest:
        raise InvalidInput(f"task {task_id!r} of run {r.id} has had {latest} tr{'y' if latest == 1 else 'ies'}")
    path = log_path(env.settings.logs_folder, dag_id, r.id, task_id, n)
    if not path.exists():
        raise InvalidInput(f"no log for try {n} of {task_id!r} in run {r.id} (expected {path})")
    typer.echo(path.read_text(errors="replace"), nl=False)


@app.command()
def clear(dag_id: DagId, run: RunArg,
          task: Annotated[list[str] | None, typer.Option("--task", "-t", help="Task id to clear (repeatable; "
                          "default: every task).")] = None,
          downstream: Annotated[bool, typer.Option("--downstream", help="Also clear the chosen tasks' "
                                "downstream tasks.")] = False) -> None:
    """Re-run chosen finished task instances of a run (each gets fresh tries); the run is queued again."""
    env = open_env()
    now = env.clock.now()
    with env.transaction() as session:
        r = _run_of(session, dag_id, run)
        if r.state == RunState.OVERRIDDEN:
            raise TimelineConflict(f"run {r.id} is overridden (by run {r.overridden_by}); it is history and is "
                                   "not re-run; backfill the date or clear the run that replaced it")
        spec = dag_store.spec(session, dag_id, r.version_hash)
        chosen = set(task or spec.tasks)
        unknown = chosen - set(spec.tasks)
        if unknown:
            raise InvalidInput(f"run {r.id} has no task {sorted(unknown)[0]!r}")
        if downstream:
            down = spec.downstream()
            stack = list(chosen)
            while stack:
                for d in down[stack.pop()]:
                    if d not in chosen:
                        chosen.add(d)
                        stack.append(d)
        tis = [ti for ti in run_store.task_instances(session, r.id) if ti.task_id in chosen]
        busy = [ti.task_id for ti in tis if ti.state in (TaskState.QUEUED, TaskState.RUNNING)]
        if busy:
            raise TimelineConflict(f"task {busy[0]!r} of run {r.id} is {TaskState.RUNNING.value} or queued; "
                                   "wait for it to finish")
        cleared = []
        for ti in tis:
            if ti.state in FINISHED_TASK_STATES or ti.state == TaskState.UP_FOR_RETRY:
                ti.state = TaskState.SCHEDULED.value
                ti.max_tries = ti.try_number + spec.tasks[ti.task_id].retries + 1
                ti.next_try_at = ti.ended_at = None
                cleared.append(ti.task_id)
        if not cleared:
            raise InvalidInput(f"nothing to clear in run {r.id}: the chosen tasks have not finished")
        before = r.state
        if r.state in (RunState.SUCCESS, RunState.FAILED):
            r.state, r.ended_at = RunState.QUEUED.value, None
        events.record(session, "tasks_cleared", at=now, actor=env.actor, dag_id=dag_id, run_id=r.id,
                      tasks=sorted(cleared), run_state_before=before, run_state=r.state)
    out.print(f"cleared {len(cleared)} task instance(s) of run {r.id}: {json.dumps(sorted(cleared))}; "
              f"run is {r.state}")
