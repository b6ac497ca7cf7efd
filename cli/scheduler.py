"""`ledger scheduler`: the daemon."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ledger.cli.env import open_env
from ledger.cli.options import DagsFolder, Parallelism, check_environment, within_range
from ledger.core.errors import InvalidInput

if TYPE_CHECKING:
    from ledger.scheduler.loop.job import DagRunJob

out = Console(highlight=False, soft_wrap=True)
EXECUTORS = ("local", "sequential", "celery")


def scheduler(
    num_runs: Annotated[int | None, typer.Option("--num-runs", min=1, callback=within_range,
                                                 help="Stop after N loops.")] = None,
    exit_when_idle: Annotated[bool, typer.Option("--exit-when-idle", help="Exit 0 once there is nothing left to "
                              "do: no due interval and no task instance running or able to start.")] = False,
    executor: Annotated[str | None, typer.Option(
        help="local (default), sequential, or celery (tries run on `ledger worker` processes; "
             "LEDGER_CELERY_BROKER_URL).")] = None,
    parallelism: Parallelism = None,
    metrics_port: Annotated[int | None, typer.Option(min=1, max=65535, help="Serve Prometheus metrics on "
                            "127.0.0.1:PORT/metrics (also LEDGER_METRICS_PORT).")] = None,
    reuse_workers: Annotated[bool | None, typer.Option("--reuse-workers", help="Run Python tries in the "
                             "long-lived worker processes, without a fork per try: faster, but tries of a worker "
                             "share its module state (also LEDGER_REUSE_WORKERS).")] = None,
    dags_folder: DagsFolder = None,
) -> None:
    """Run the scheduler: parse DAG files, create due runs, execute task instances."""
    from ledger.infra.scheduler_settings import SchedulerSettings
    from ledger.scheduler.executors import executor_for
    from ledger.scheduler.loop.scheduler_job import SchedulerJob
    from ledger.services import openlineage

    if executor is not None and executor not in EXECUTORS:
        raise typer.BadParameter(f"--executor must be {', '.join(EXECUTORS[:-1])} or {EXECUTORS[-1]}, not "
                                 f"{executor!r}",
                                 param_hint="'--executor'")
    check_environment()
    settings = SchedulerSettings.from_env(executor=executor, parallelism=parallelism, metrics_port=metrics_port,
                                          reuse_workers=reuse_workers or None)
    env = open_env(dags_folder)
    sessions = env.sessions  # checks that the database is ready before anything starts
    env.require_dags_folder()
    job = SchedulerJob(
        sessions=sessions, engine=env.engine, settings=settings,
        executor=executor_for(settings),
        clock=env.clock, actor=env.actor,
        logs_folder=env.settings.logs_folder, say=_say, dags_folder=env.settings.dags_folder)
    if settings.metrics_port:
        try:
            job.metrics.serve(settings.metrics_port, settings.metrics_host)
        except OSError as exc:
            raise InvalidInput(f"cannot serve metrics on {settings.metrics_host}:{settings.metrics_port}: "
                               f"{exc.strerror or exc}") from None
        _say(f"metrics on http://{settings.metrics_host}:{settings.metrics_port}/metrics")
    job.install_signal_handlers()
    local = settings.executor == "local"
    reusing = ", Python tries in reused workers" if settings.reuse_workers and local else ""
    if local and settings.items_ahead():
        reusing += f", {settings.items_ahead()} queued ahead per worker"
    _say(f"scheduler starting: executor {settings.executor}, parallelism {settings.parallelism}{reusing}, "
         f"DAGs folder {env.settings.dags_folder}")
    with openlineage.relay(sessions, env.settings.home, job.metrics.registry, _say):  # when OPENLINEAGE_* is set
        job.run(num_runs=num_runs, exit_when_idle=exit_when_idle)
    _say(f"scheduler job {job.job_id} stopped")
    if exit_when_idle and not job.stopping:
        _say_left_waiting(job)


def _say_left_waiting(job: DagRunJob) -> None:
    """The runs an idle scheduler leaves unfinished, each with why it waits (a depends_on_past task whose
    previous run failed, a run another job holds, a DAG paused with --stop-queued...)."""
    from ledger.store.backfills import left_waiting

    with job.reading() as session:
        left = left_waiting(session)
    for run, why in left:
        _say(f"left waiting: {run.dag_id} {run.logical_date.isoformat()} run {run.id} ({run.state})"
             + (f": {why}" if why else ""))


@functools.lru_cache(maxsize=4)
def _to_terminal(_stream: object) -> bool:
    """Whether the scheduler's output (the stream sys.stdout is now) is a terminal: asked once per stream (rich's
    answer reads the environment each time)."""
    return out.is_terminal


def _say(line: str) -> None:
    stamp = datetime.now().strftime('%H:%M:%S')
    if _to_terminal(sys.stdout):
        out.print(f"[dim]{stamp}[/dim] {escape(line)}")
    else:  # a log file or a pipe gets plain text: rich renders a line in about 0.3 ms of the scheduler's CPU
        sys.stdout.write(f"{stamp} {line}\n")
        sys.stdout.flush()
