"""`ledger tasks logs|clear`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.orm import Session

from ledger.cli import testing
from ledger.cli.env import open_env, print_json
from ledger.cli.options import DagId, DagsFolder, Json, Reason, RunId, reason_text, within_range
from ledger.core.errors import InvalidInput
from ledger.core.mapping import NOT_MAPPED, choose_instance, label
from ledger.core.states import ACTIVE_TASK_STATES, TaskState
from ledger.infra.logs import log_path
from ledger.models import DagRun, TaskInstance
from ledger.services import log_store
from ledger.services.log_store import TryRef
from ledger.store import dags as dag_store
from ledger.store import events, run_reads, try_logs
from ledger.store import identity as identity_store
from ledger.store import runs as run_store
from ledger.store import tasks as task_store
from ledger.store import xcom as xcom_store

app = typer.Typer(help="Inspect and re-run task instances.", no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)

RunArg = RunId
MapIndex = Annotated[int | None, typer.Option("--map-index", min=0, callback=within_range, help="Which instance "
                                              "of a mapped task (0, 1, ...); required for a mapped task.",
                                              show_default=False)]


def _run_of(session: Session, dag_id: str, run: int) -> DagRun:
    r = run_store.get(session, run)
    if r.dag_id != dag_id:
        raise InvalidInput(f"run {r.id} belongs to DAG {r.dag_id!r}, not {dag_id!r}")
    return r


def _instance_of(session: Session, r: DagRun, task_id: str, map_index: int | None) -> TaskInstance:
    """The task instance a command names: the task's one instance, or instance --map-index of a mapped task
    (refused, one line, when missing or not given for a mapped task)."""
    found = {ti.map_index: ti for ti in task_store.instances(session, r.id, task_id)}
    try:
        return found[choose_instance(task_id, r.id, sorted(found), map_index)]
    except LookupError as exc:
        raise InvalidInput(str(exc.args[0])) from None


@app.command()
def logs(dag_id: DagId, run: RunArg, task_id: Annotated[str, typer.Argument(help="The task id.")],
         try_number: Annotated[int | None, typer.Option("--try", min=1, callback=within_range,
                                                        help="Which try (default: the latest).")] = None,
         map_index: MapIndex = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing what the log gains until the "
                                              "try has ended (a remote try's log arrives as it is written).")]
         = False) -> None:
    """Print the log of one try of a task instance."""
    env = open_env()
    with env.reading() as session:
        r = _run_of(session, dag_id, run)
        ti = _instance_of(session, r, task_id, map_index)
        latest, index, name = ti.try_number, ti.map_index, label(task_id, ti.map_index)
        tries = {t.try_number: t for _, t in run_reads.tries_of_run(session, r.id) if t.task_instance_id == ti.id}
    if latest == 0:
        raise InvalidInput(f"task {name!r} of run {r.id} has not run yet")
    n = try_number or latest
    if n > latest:
        raise InvalidInput(f"task {name!r} of run {r.id} has had {latest} tr{'y' if latest == 1 else 'ies'}")
    path = log_path(env.settings.logs_folder, dag_id, r.id, task_id, n, index)
    the_try = tries.get(n)
    state = the_try.state if the_try is not None else "?"
    active = {s.value for s in ACTIVE_TASK_STATES}
    with env.reading() as session:  # (its kept row, if it ran on another host and has ended)
        kept = try_logs.find(session, r.id, task_id, index, n)
        identity = identity_store.read(session)
    ref = TryRef(dag_id, r.id, task_id, n, ti.id, index, identity.of(ti.id), identity.identity)
    source = log_store.locate(env.settings.logs_folder, ref, kept, ended=state not in active)
    if source is None and not (follow and state in active):
        raise InvalidInput(f"no log for try {n} of {name!r} in run {r.id} (expected {path}; a try that ran on "
                           "another host: in the database, the remote log store or, while it runs, the Celery "
                           "result backend)")
    version = the_try.dag_version if the_try is not None and the_try.dag_version else "not recorded"
    typer.echo(f"=== {dag_id} run {r.id} task {name} try {n}/{latest}: {state}, version {version} ===")
    printed = _Printed()
    printed.add(source)
    while follow and state in active:
        time.sleep(FOLLOW_INTERVAL)
        with env.reading() as session:
            found = run_store.try_state(session, ti.id, n)
        state = found or "?"
        if source is None:  # not started yet, or nothing of it written yet: look again
            source = log_store.locate(env.settings.logs_folder, ref, None, ended=False)
        printed.add(source)  # (read after the state: what a try that ended wrote is all there)


FOLLOW_INTERVAL = 0.5  # seconds between two looks at a followed log
TAIL = 64  # bytes of what was printed last that the log must still hold before the offset: else it was rewritten


class _Printed:
    """What a follower has printed of a log: its offset, and enough to go on at the same line when the try rewrote
    its log as it ended (the secrets it read masked: other lengths, the same lines)."""

    def __init__(self) -> None:
        self.offset, self.lines, self.partial, self.tail = 0, 0, 0, b""

    def add(self, source: log_store.LogSource | None) -> None:
        """Print what the log gained since the last call (one read, with the tail printed last before it)."""
        if source is None:
            return
        back = len(self.tail)
        data = source.read(self.offset - back, max(source.size() - self.offset + back, 0))
        if data[:back] == self.tail:
            start, data = self.offset, data[back:]
        else:  # rewritten since
            whole = source.read(0, source.size())
            start = log_store.resume_offset(whole, self.lines, self.partial)
            data = whole[start:]
        if not data:
            return
        typer.echo(data.decode("utf-8", errors="replace"), nl=False)
        self.offset, self.tail = start + len(data), (self.tail + data)[-TAIL:]
        lines = data.count(b"\n")
        self.lines += lines
        self.partial = len(data) - data.rfind(b"\n") - 1 if lines else self.partial + len(data)


@app.command()
def clear(dag_id: DagId, run: RunArg,
          task: Annotated[list[str] | None, typer.Option("--task", "-t", help="Task id to clear (repeatable; "
                          "default: every task).")] = None,
          downstream: Annotated[bool, typer.Option("--downstream", help="Also clear the chosen tasks' "
                                "downstream tasks.")] = False,
          on_latest_version: Annotated[bool, typer.Option("--on-latest-version", help="Run the cleared tasks on the "
                                       "DAG's current version: clearing the whole run first moves the run to it "
                                       "(recorded as an event), clearing some tasks leaves the run on its version; "
                                       "by default the cleared tasks run the code of the run's own version.")] = False,
          dags_folder: DagsFolder = None) -> None:
    """Re-run chosen finished task instances of a run (each gets fresh tries); the run is queued again.

    The tries run the code of the run's own version, as its first tries did, unless --on-latest-version."""
    from ledger.services.operations import clear_tasks

    env = open_env(dags_folder)
    if on_latest_version:
        env.refresh_dags()  # "latest" is what the DAGs folder holds now
    now = env.clock.now()
    with env.transaction() as session:
        r = _run_of(session, dag_id, run)
        done = clear_tasks(session, r, task, downstream=downstream, on_latest_version=on_latest_version, now=now,
                           actor=env.actor)
        moved, cleared, version, external = done.moved, done.cleared, done.version, done.external
        stays = "" if version == r.version_hash else f" (the run stays on version {r.version_hash[:12]})"
    if moved is not None:
        old, new, added, removed = moved
        out.print(f"run {r.id} moved from version {old[:12]} to {new[:12]}"
                  + (f"; new tasks {json.dumps(added)}" if added else "")
                  + (f"; removed tasks {json.dumps(removed)}" if removed else ""))
    out.print(f"cleared {len(cleared)} task instance(s) of run {r.id}: {json.dumps(sorted(cleared))}; "
              f"run is {r.state}; they run version {version[:12]}{stays}")
    for other_dag, other_run, tasks in external:  # through ExternalTaskMarkers
        out.print(f"cleared {len(tasks)} task instance(s) of {other_dag} run {other_run} (external task marker): "
                  f"{json.dumps(tasks)}")


@app.command()
def mark(dag_id: DagId, run: RunArg,
         task: Annotated[str, typer.Argument(help="The task id, or TASK[i] for one mapped instance.",
                                             show_default=False)],
         state: Annotated[str, typer.Option("--state", help="success, failed or skipped.", show_default=False)],
         downstream: Annotated[bool, typer.Option("--downstream", help="Also mark the task's downstream "
                               "tasks.")] = False,
         upstream: Annotated[bool, typer.Option("--upstream", help="Also mark the task's upstream "
                             "tasks.")] = False,
         reason: Reason = None) -> None:
    """Set a task instance's state by hand (an event records who did it). The run then finishes when every
    task instance has, or is queued again for the scheduler to carry on."""
    from ledger.services.operations import MARKABLE, mark_tasks

    why = reason_text(reason)
    if state not in {s.value for s in MARKABLE}:
        raise typer.BadParameter(f"--state must be success, failed or skipped, not {state!r}", param_hint="'--state'")
    env = open_env()
    with env.transaction() as session:
        r = _run_of(session, dag_id, run)
        spec = dag_store.spec(session, dag_id, r.version_hash)
        done = mark_tasks(session, r, spec, [task], TaskState(state), downstream=downstream, upstream=upstream,
                          now=env.clock.now(), actor=env.actor, reason=why)
        run_id = r.id
    out.print(f"run {run_id} of {dag_id}: marked {state}: {', '.join(sorted(done.changed))}; run "
              f"{done.run_state_before} → {done.run_state}" + (f"; reason: {why}" if why else ""), highlight=False,
              soft_wrap=True)


@app.command()
def xcom(dag_id: DagId, run: RunArg, task_id: Annotated[str, typer.Argument(help="The task id.")],
         as_json: Json = False, map_index: MapIndex = None) -> None:
    """The values a task instance's tries passed on (return value and xcom_push), per try."""
    from ledger.services.documents import xcom_rows

    run_id, rows = _task_rows(dag_id, run, task_id, map_index, lambda s, r, i: xcom_rows(s, r, task_id, i))
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print(f"task {task_id!r} of run {run_id} passed no values on", highlight=False)
        return
    table = Table("try", "key", "value")
    for row in rows:
        table.add_row(str(row["try_number"]), row["key"], json.dumps(row["value"], ensure_ascii=False))
    out.print(table)


@app.command()
def rendered(dag_id: DagId, run: RunArg, task_id: Annotated[str, typer.Argument(help="The task id.")],
             as_json: Json = False, map_index: MapIndex = None) -> None:
    """The templated fields of a task instance as each try rendered them (Jinja: {{ ds }}, {{ params.x }}...)."""
    run_id, rows = _task_rows(dag_id, run, task_id, map_index, lambda s, r, i: [
        {"try_number": t.try_number, "rendered": t.rendered,
         "error": _template_error(s, r, task_id, t.try_number, i)}
        for t in xcom_store.rendered_tries(s, r, task_id, i)])
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print(f"task {task_id!r} of run {run_id} has not run yet", highlight=False)
        return
    for row in rows:
        out.print(f"try {row['try_number']}:", highlight=False)
        for name, value in (row["rendered"] or {}).items():
            out.print(f"  {name}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}",
                      highlight=False, markup=False)
        if row["error"]:
            out.print(f"  (not rendered: {row['error']})", highlight=False, markup=False)
        elif not row["rendered"]:
            out.print("  (no templated fields)", highlight=False)


def _template_error(session: Session, run_id: int, task_id: str, try_number: int, map_index: int) -> str | None:
    """Why a try's templates were not rendered (its task_failed event's reason), or None."""
    for e in events.listing(session, run_id=run_id, kinds=["task_failed"], task_id=task_id):
        reason = (e.details or {}).get("reason") or ""
        if e.details.get("try_number") == try_number and e.details.get("map_index", NOT_MAPPED) == map_index \
                and reason.startswith("template error"):
            return str(reason)
    return None


def _task_rows(dag_id: str, run: int, task_id: str, map_index: int | None,
               fetch: Callable[[Session, int, int], list[dict[str, Any]]]) -> tuple[int, list[dict[str, Any]]]:
    """(run id, rows fetch() reads for the run's task instance: run id, map index), in a read-only session;
    unknown run, task or instance, or a mapped task without --map-index: one line."""
    env = open_env()
    with env.reading() as session:
        r = _run_of(session, dag_id, run)
        ti = _instance_of(session, r, task_id, map_index)
        return r.id, fetch(session, r.id, ti.map_index)


app.command("test")(testing.task_test)
