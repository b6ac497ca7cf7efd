"""The `ledger` command: one typer app, one module per command group."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError
from typer._click.exceptions import NoArgsIsHelpError, UsageError

from cli import (
    backfill,
    callbacks,
    dags,
    datasets,
    db,
    events,
    lineage,
    pools,
    runs,
    scheduler,
    secrets,
    signal,
    tasks,
    timeline,
    trigger,
    users,
    webserver,
    worker,
)
from ledger.core.errors import LedgerError

app = typer.Typer(
    help="ledger: a workflow scheduler whose core is an auditable timeline of DAG runs.",
    no_args_is_help=True, pretty_exceptions_show_locals=False, add_completion=False,
)
app.add_typer(db.app, name="db")
app.add_typer(dags.app, name="dags")
app.add_typer(runs.app, name="runs")
app.add_typer(tasks.app, name="tasks")
app.add_typer(pools.app, name="pools")
app.add_typer(backfill.app, name="backfill")
app.add_typer(datasets.app, name="datasets")
app.add_typer(signal.app, name="signal")
app.add_typer(secrets.variables, name="variables")
app.add_typer(secrets.connections, name="connections")
app.add_typer(users.app, name="users")
app.command("trigger")(trigger.trigger)
app.command("timeline")(timeline.timeline)
app.command("events")(events.events)
app.command("callbacks")(callbacks.callbacks)
app.command("webserver")(webserver.webserver)
app.command("scheduler")(scheduler.scheduler)
app.command("worker")(worker.worker)
app.command("workers")(worker.workers)
app.command("lineage")(lineage.lineage)

err = Console(stderr=True, soft_wrap=True, highlight=False)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _usage_line(exc: UsageError) -> str:
    """A usage error as one line: the message and where to look, e.g. `ledger pools set: Missing argument
    'slots'. (see ledger pools set --help)`."""
    ctx = exc.ctx
    where = ctx.command_path if ctx is not None else "ledger"
    return f"Error: {where}: {_one_line(exc.format_message())} (see `{where} --help`)"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: user errors become one line on stderr and exit status 1; usage errors
    (a missing argument, an unknown option) one line and exit status 2."""
    try:
        code = app(args=argv, prog_name="ledger", standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except NoArgsIsHelpError as exc:  # `ledger` or `ledger dags` alone: the help, as before
        exc.show()
        sys.exit(2)
    except UsageError as exc:
        err.print(_usage_line(exc), markup=False)
        sys.exit(2)
    except LedgerError as exc:
        err.print(f"Error: {_one_line(str(exc))}", markup=False)
        sys.exit(1)
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        err.print(f"Error: database error: {first[0] if first else type(exc).__name__}", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    run()
