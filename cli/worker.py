"""`ledger worker` (a Celery worker for `--executor celery`) and `ledger workers` (the live workers)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.options import Json, check_environment, within_range
from ledger.core.errors import ConfigError

if TYPE_CHECKING:
    from ledger.scheduler.runtime.celery_worker import WorkerSettings

out = Console(highlight=False, soft_wrap=True)
QUEUE_NAME = re.compile(r"[\w.-]+")


def _queues(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(q.strip() for q in text.split(",") if q.strip()))
    bad = next((q for q in names if not QUEUE_NAME.fullmatch(q)), None)
    if not names or bad is not None:
        raise typer.BadParameter(f"queues are names of letters, digits, '_', '.' and '-', separated by commas; "
                                 f"got {text!r}", param_hint="'--queues'")
    return names


def worker(
    queues: Annotated[str, typer.Option(help="The queues to take tries from, separated by commas (a task's "
                                             "`queue=`; tasks that name none use `default`).")] = "default",
    concurrency: Annotated[int | None, typer.Option(min=1, max=1024, callback=within_range,
                                                    help="Tries run at once (default: the CPUs).")] = None,
    hostname: Annotated[str | None, typer.Option(help="This worker's name, recorded on each try it runs "
                                                      "(default: the host's name, or <host>-2, <host>-3... when "
                                                      "another live worker has it). A name a live worker holds "
                                                      "is refused.")] = None,
    metrics_port: Annotated[int | None, typer.Option(min=1, max=65535, help="Serve the fleet's fault counters of "
                                                     "this worker and its pool processes on 127.0.0.1:PORT/metrics "
                                                     "(LEDGER_METRICS_HOST for another address).")] = None,
) -> None:
    """Run a Celery worker for the scheduler's `--executor celery`.

    Needs no DAGs folder and no database: each try runs from its run's pinned version, fetched by hash from
    ledger's webserver (LEDGER_API_URL, with LEDGER_WORKER_TOKEN) into $LEDGER_HOME/code. Reaches the broker
    (LEDGER_CELERY_BROKER_URL) and the result backend (LEDGER_CELERY_RESULT_BACKEND, default the broker)."""
    import uuid

    from ledger.scheduler.runtime.celery_worker import claim_name, serve, settings_from_env

    names = _queues(queues)
    if hostname is not None and not QUEUE_NAME.fullmatch(hostname):
        raise typer.BadParameter(f"a worker's name is letters, digits, '_', '.' and '-', not {hostname!r}",
                                 param_hint="'--hostname'")
    check_environment()
    incarnation = uuid.uuid4().hex
    settings, note = claim_name(settings_from_env(name=hostname, queues=names, concurrency=concurrency,
                                                  metrics_port=metrics_port or 0), incarnation)
    out.print(f"ledger worker {settings.name}: queues {', '.join(names)}, concurrency {settings.concurrency}, "
              f"code from {settings.api_url}, home {settings.home}" + (f" ({note})" if note else ""))
    if serve(settings, incarnation):
        _restart(settings)


def _restart(settings: WorkerSettings) -> None:
    """Celery's consumer stopped on an error it does not recover from (a Redis restart met in kombu's transport):
    this worker starts again as a new incarnation of its name, in this process (its own entry is taken over,
    scheduler/runtime/celery_worker.py: _write_entry), once Redis answers. Its tries had finished (a warm shutdown);
    messages it held come back to the queue or are sent again by the scheduler, and a try's claim keeps any from
    running twice."""
    import os
    import sys
    import time

    from ledger.infra.workers import NAME_VARIABLE
    from ledger.scheduler.runtime.celery_worker import wait_for_redis

    out.print(f"ledger worker {settings.name}: Celery's consumer stopped on an error; starting again as a new "
              f"incarnation once Redis answers")
    time.sleep(1.0)  # (an error that stays: one start a second, not a loop)
    wait_for_redis(settings)
    os.environ[NAME_VARIABLE] = settings.name
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def workers(as_json: Json = False) -> None:
    """The Celery workers, their incarnations and their running tries' leases.

    The live workers (name, host, queues, concurrency, running tries, last heartbeat); each name's incarnations
    (host, pid, started, last heartbeat; current or gone); the leases of its running tries (task instance, try,
    holder, expires in, or how the lease ended). Read from the result backend's Redis."""
    from ledger.infra.workers import BROKER_VARIABLE, backend_url, fleet, listing

    url = backend_url()
    if url is None:
        raise ConfigError(f"no Celery workers to list: {BROKER_VARIABLE} is not set")
    rows = listing(url)
    names = fleet(url)
    if as_json:
        from ledger.cli.env import print_json  # (here: `ledger worker`'s processes load no database layer)

        by_name = {r["name"]: r for r in names}
        print_json([{**r, **by_name.pop(r["name"], {})} for r in rows] + list(by_name.values()))
        return
    table = Table("name", "host", "queues", "concurrency", "running", "last heartbeat")
    for r in rows:
        table.add_row(r["name"], str(r["host"]), ",".join(r["queues"]), str(r["concurrency"]), str(r["running"]),
                      f"{r['seconds_since_heartbeat']:.1f} s ago")
    out.print(table if rows else "no live workers")
    lives = Table("name", "incarnation", "host", "pid", "started", "last heartbeat", "state", title="incarnations")
    leases = Table("name", "task instance", "try", "holder", "lease", title="leases of running tries")
    for w in names:
        for i in w["incarnations"]:
            lives.add_row(w["name"], str(i["incarnation"])[:12], str(i["host"]), str(i["pid"]), _when(i["started"]),
                          f"{i['seconds_since_heartbeat']:.1f} s ago", i["state"])
        for lease in w["leases"]:
            left = (f"expires in {lease['expires_in']:.1f} s" if lease["expires_in"] is not None
                    else lease["ended"] or "held")
            leases.add_row(w["name"], str(lease["ti_id"]), str(lease["try_number"]), lease["holder"] or "-", left)
    if names:
        out.print(lives)
        out.print(leases if leases.row_count else "no running tries hold a lease")


def _when(epoch: float | None) -> str:
    from datetime import UTC, datetime

    return "-" if epoch is None else datetime.fromtimestamp(float(epoch), UTC).strftime("%Y-%m-%d %H:%M:%S")
