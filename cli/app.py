"""The `ledger` command: one typer app, one module per command group."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from cli import backfill, dags, db, events, lineage, pools, runs, scheduler, signal, tasks, timeline, trigger
from ledger.errors import LedgerError

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
app.add_typer(signal.app, name="signal")
app.command("trigger")(trigger.trigger)
app.command("timeline")(timeline.timeline)
app.command("events")(events.events)
app.command("scheduler")(scheduler.scheduler)
app.command("lineage")(lineage.lineage)

err = Console(stderr=True, soft_wrap=True, highlight=False)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: user errors become one line on stderr and exit status 1."""
    try:
        app(args=argv, prog_name="ledger")
    except LedgerError as exc:
        err.print(f"Error: {_one_line(str(exc))}", markup=False)
        sys.exit(1)
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        err.print(f"Error: database error: {first[0] if first else type(exc).__name__}", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    run()
