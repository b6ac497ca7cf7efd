"""`ledger tasks test` and `ledger dags test`: the local test loop (scheduler/runtime/local_testing.py)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli.env import open_env, parse_conf
from ledger.cli.options import DagId, DagsFolder, checked_date, usage_error
from ledger.core.dates import check_within_dag, parse_user_date
from ledger.core.errors import InvalidInput
from ledger.core.mapping import split_label
from ledger.core.states import RunState, TaskState
from ledger.infra.logs import log_path
from ledger.sdk.params import check_conf, from_description

if TYPE_CHECKING:  # the test loop (task running, templates, jinja2) is imported by the test commands only
    from ledger.scheduler.runtime.local_testing import TestRun

LogicalDate = Annotated[str | None, typer.Option("--logical-date", help="ISO date or datetime, in the DAG's "
                        "timezone when naive (default: now).", callback=checked_date)]
Conf = Annotated[str | None, typer.Option(help="A JSON object given to the run as its conf.")]


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _check_conf(params: Mapping[str, Mapping[str, Any]], conf: dict[str, Any] | None, dag_id: str) -> None:
    """A --conf that does not fit the DAG's params is one line, as for `ledger trigger`."""
    try:
        check_conf(from_description(params), conf, dag_id=dag_id)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _prepare(dag_id: str, logical_date: str | None, conf: str | None, dags_folder: object) -> TestRun:
    conf_value = parse_conf(conf)
    env = open_env(dags_folder)  # type: ignore[arg-type]
    env.require_dags_folder()
    from ledger.scheduler.runtime.local_testing import TestRun, find_dag

    dag = find_dag(env.settings.dags_folder, dag_id)
    run = TestRun.of(dag, env.clock.now(), conf_value, env.settings.dags_folder)
    _check_conf(run.spec.params, conf_value, dag_id)  # as `ledger trigger` checks it
    if logical_date is not None:
        at = parse_user_date(logical_date, timezone=run.spec.timezone, what="--logical-date")
        check_within_dag(run.spec, at, what="--logical-date")
        run = TestRun.of(dag, at, conf_value, env.settings.dags_folder)
    return run


def task_test(dag_id: DagId, task_id: Annotated[str, typer.Argument(help="The task id.", show_default=False)],
              logical_date: LogicalDate = None, conf: Conf = None, dags_folder: DagsFolder = None) -> None:
    """Run one task now, in the foreground, from the DAG file as it is in the DAGs folder, with the context and
    environment the scheduler would give its try; print its log. Records nothing (the database is not
    opened). Exit 0 when the try succeeded (or skipped), 1 otherwise."""
    run = _prepare(dag_id, logical_date, conf, dags_folder)
    from ledger.scheduler.runtime.local_testing import test_task

    state = test_task(run, task_id, _say)
    if state not in (TaskState.SUCCESS.value, TaskState.SKIPPED.value):
        raise typer.Exit(1)


def dag_test(dag_id: DagId, logical_date: LogicalDate = None, conf: Conf = None,
             record: Annotated[bool, typer.Option("--record", help="Register the DAG file's version and keep "
                                                  "the test as a run of type `test` in the timeline (with its "
                                                  "tries, logs and events); refused where a live run holds the "
                                                  "date, unless --replace.")] = False,
             replace: Annotated[bool, typer.Option("--replace", help="With --record: override the live run at "
                                                   "that date.")] = False,
             dags_folder: DagsFolder = None) -> None:
    """Run every task of the DAG now, one at a time in dependency order, by the real rules (trigger rules,
    retries, which run at once), from the DAG file as it is in the DAGs folder; print each try's log.
    Records nothing unless --record. Exit 0 when the run would succeed, 1 when it would fail."""
    if replace and not record:
        raise usage_error("--replace goes with --record")
    if record:
        _record(dag_id, logical_date, conf, replace, dags_folder)
        return
    run = _prepare(dag_id, logical_date, conf, dags_folder)
    _say(f"test run of {dag_id} at {run.gives.logical_date.isoformat()} "
         f"(interval {run.gives.data_interval_start.isoformat()} "
         f"to {run.gives.data_interval_end.isoformat()}), version {run.spec.version_hash[:12]} (not registered)")
    from ledger.scheduler.runtime.local_testing import test_dag

    state = test_dag(run, _say)
    _say(f"test run of {dag_id}: {state.value}")
    if state != RunState.SUCCESS:
        raise typer.Exit(1)


def _record(dag_id: str, logical_date: str | None, conf: str | None, replace: bool, dags_folder: object) -> None:
    """A run of type `test`, spliced into the timeline like a manual run and executed here, with the code of
    the version just registered (the DAG file as it is now)."""
    from ledger.core.states import RunType
    from ledger.infra.scheduler_settings import SchedulerSettings
    from ledger.scheduler.executors.sequential import SequentialExecutor
    from ledger.scheduler.loop.dag_test_job import TestRunJob
    from ledger.store import dags as dag_store
    from ledger.store import run_reads
    from ledger.store import runs as run_store

    conf_value = parse_conf(conf)
    env = open_env(dags_folder)  # type: ignore[arg-type]
    env.refresh_dags()
    with env.transaction() as session:
        spec = dag_store.current_spec(session, dag_id)
        if dag_store.get(session, dag_id).hold_queued:  # its job would leave the run queued, for later
            raise InvalidInput(f"DAG {dag_id} is paused with --stop-queued: its queued runs do not start, a recorded "
                               f"test's included; `ledger dags unpause {dag_id}` first, or test without --record")
        at = parse_user_date(logical_date, timezone=spec.timezone, what="--logical-date") \
            if logical_date is not None else env.clock.now()
        check_within_dag(spec, at, what="--logical-date")
        _check_conf(spec.params, conf_value, dag_id)
        run = run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(at), RunType.TEST,
                                                               conf_value), now=env.clock.now(), actor=env.actor,
                               replace=replace)
        run_id = run.id
    _say(f"test run {run_id} of {dag_id} at {run.logical_date.isoformat()}, version {run.version_hash[:12]} "
         "(recorded: `ledger runs show` and `ledger tasks logs` show it)")
    settings = SchedulerSettings.from_env(executor="sequential", parallelism=1)
    job = TestRunJob(sessions=env.sessions, engine=env.engine, settings=settings, executor=SequentialExecutor(),
                     clock=env.clock, actor=env.actor, logs_folder=env.settings.logs_folder, say=_say, run_id=run_id)
    job.install_signal_handlers()
    job.run(exit_when_idle=True)
    with env.reading() as session:
        state = run_store.get(session, run_id).state
        tries = sorted(((t.started_at, task_id, t.try_number, t.state) for task_id, t in
                        run_reads.tries_of_run(session, run_id)), key=lambda x: (x[0] is None, x[0] or 0, x[2]))
    for _started, key, number, try_state in tries:  # each try's log, as the unrecorded test prints them
        _say(f"--- {key} try {number}: {try_state}")
        task_id, map_index = split_label(key)
        log = log_path(env.settings.logs_folder, dag_id, run_id, task_id, number, map_index)
        if log.is_file():
            _say(log.read_text(errors="replace").rstrip("\n"))
    _say(f"test run {run_id} of {dag_id}: {state}")
    if state != RunState.SUCCESS.value:
        raise typer.Exit(1)
