"""The `ledger` command: one typer app, one module per command group."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ledger.core.errors import LedgerError

HELP = "ledger: a workflow scheduler whose core is an auditable timeline of DAG runs."

# Every command: its name, where it is ("module:attribute": a Typer app for a group of commands, a function for
# one command), and the line `ledger --help` shows for it (tests/cli/test_startup.py keeps each line equal to
# the first paragraph of the command's own help). A command's module is imported only when that command runs.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("db", ".db:app", "Create, upgrade and check the ledger database."),
    ("dags", ".dags:app", "Inspect the DAGs of the DAGs folder and their versions."),
    ("runs", ".runs:app", "Inspect DAG runs."),
    ("tasks", ".tasks:app", "Inspect and re-run task instances."),
    ("pools", ".pools:app", "Pools limit the task instances that run at once across DAGs (each takes its pool_slots)."),
    ("backfill", ".backfill:app", "Rewrite a DAG's history: `ledger backfill DAG --start A --end B` (short for "
     "`ledger backfill create ...`), `ledger backfill list`, `ledger backfill cancel ID`."),
    ("datasets", ".datasets:app", "Datasets: which tasks write them, which DAGs run on them, their events."),
    ("signal", ".signal:app", "Signals: (key, value) messages, versioned per key, kept and heard at once by "
     "listeners."),
    ("variables", ".secrets:variables", "Named values for DAGs ({{ var.value.NAME }}, Variable.get), stored "
     "encrypted."),
    ("connections", ".secrets:connections", "How DAGs reach other systems ({{ conn.ID.host }}, get_connection), "
     "passwords stored encrypted."),
    ("users", ".users:app", "Users of the web view and their roles (viewer, operator, admin) and API tokens."),
    ("trigger", ".trigger:trigger", "Create a manual run (queued) and splice it into the DAG's timeline."),
    ("timeline", ".timeline:timeline", "The DAG's runs in chain order, with overrides, version and schedule "
     "changes."),
    ("events", ".events:events", "Every recorded change: runs created, spliced, overridden, state changes, locks, "
     "versions, signals."),
    ("callbacks", ".callbacks:callbacks", "Callback and notifier calls: what each was called for (a try failed, "
     "a run ended, a deadline passed), what was called (as the run's version records it), and how it ended "
     "(pending, running, ok, error, timeout, lost). Each outcome is also an event (callback_ok, callback_error, "
     "...)."),
    ("webserver", ".webserver:webserver", "Serve the ledger in a browser, its JSON API and its write API."),
    ("scheduler", ".scheduler:scheduler", "Run the scheduler: parse DAG files, create due runs, execute task "
     "instances."),
    ("worker", ".worker:worker", "Run a Celery worker for the scheduler's `--executor celery`."),
    ("workers", ".worker:workers", "The Celery workers, their incarnations and their running tries' leases."),
    ("lineage", ".lineage:lineage", "Which run (task, try, DAG version) produced each partition of a dataset, "
     "and what it replaced."),
    ("standalone", ".standalone:standalone", "Run a whole local stack: the scheduler, the webserver and optional "
     "Celery workers; Ctrl-C stops them all."),
    ("audit", ".audit:app", "Verify that the history was not edited, and export it for others to check."),
    ("version", ".app:version", "Print ledger's version."),
)


def version() -> None:
    """Print ledger's version."""
    from ledger import __version__

    typer.echo(f"ledger {__version__}")


def load(name: str, where: str) -> Any:
    """The click command of `ledger NAME`, built from its module (imported now)."""
    module, _, attribute = where.partition(":")
    found = getattr(import_module(module, __package__), attribute)
    if isinstance(found, typer.Typer):
        command = typer.main.get_command(found)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(found)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyCommands(TyperGroup):
    """The top-level `ledger` group: lists every command from COMMANDS without importing it, and imports a
    command's module when the command line names it."""

    def __init__(self) -> None:
        # the list of commands in click's plain layout: typer's rich layout loads rich and a Markdown parser, the
        # larger part of what `ledger --help` costs (decision 0297); a command's own help keeps typer's layout
        super().__init__(name="ledger", help=HELP, no_args_is_help=True, rich_markup_mode=None)
        self.where = {name: where for name, where, _ in COMMANDS}
        for name, _, line in COMMANDS:
            self.add_command(TyperCommand(name, short_help=line, help=line), name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        where = self.where.pop(name, None)
        if where is not None:
            self.commands[name] = load(name, where)
        return super().resolve_command(ctx, args)


def __getattr__(name: str) -> Any:
    """`app`: the whole CLI as one Typer app, every command module imported (docs/generate_cli_reference.py and
    the tests that walk every command use it; `ledger` itself runs LazyCommands)."""
    if name != "app":
        raise AttributeError(f"module 'ledger.cli.app' has no attribute {name!r}")
    full = typer.Typer(help=HELP, no_args_is_help=True, pretty_exceptions_show_locals=False, add_completion=False)
    for command, where, _ in COMMANDS:
        module, _, attribute = where.partition(":")
        found = getattr(import_module(module, __package__), attribute)
        if isinstance(found, typer.Typer):
            full.add_typer(found, name=command)
        else:
            full.command(command)(found)
    globals()["app"] = full
    return full


def _say_error(line: str) -> None:
    """One line on stderr, as typed (rich is loaded only when a command fails: a command that works never needs it
    here)."""
    from rich.console import Console

    Console(stderr=True, soft_wrap=True, highlight=False).print(line, markup=False)


def _one_line(text: str) -> str:
    return " ".join(text.split())


USAGE_EXIT = 2  # typer's usage errors (a missing argument, an unknown option, a bad value) exit with it


def _usage_line(exc: typer.TyperException) -> str:
    """A usage error as one line: the message and where to look, e.g. `ledger pools set: Missing argument
    'slots'. (see ledger pools set --help)`."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "ledger"
    return f"Error: {where}: {_one_line(exc.format_message())} (see `{where} --help`)"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: user errors become one line on stderr and exit status 1; usage errors
    (a missing argument, an unknown option) one line and exit status 2."""
    if (sys.argv[1:] if argv is None else argv) == ["version"]:
        # nothing to parse: answered before typer builds a command, which loads pydantic (decision 0297)
        version()
        return
    try:
        code = LazyCommands().main(args=argv, prog_name="ledger", standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except typer.TyperException as exc:
        # typer exports no usage-error class (its click is private to it): a usage error is what exits with 2
        if exc.exit_code != USAGE_EXIT:
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # `ledger` or `ledger dags` alone: the help, as before
            exc.show()  # type: ignore[attr-defined]
        else:
            _say_error(_usage_line(exc))
        sys.exit(USAGE_EXIT)
    except LedgerError as exc:
        _say_error(f"Error: {_one_line(str(exc))}")
        sys.exit(1)
    except Exception as exc:
        if not _is_database_error(exc):
            raise
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        _say_error(f"Error: database error: {first[0] if first else type(exc).__name__}")
        sys.exit(1)


def _is_database_error(exc: BaseException) -> bool:
    """Whether `exc` is SQLAlchemy's: a command that never loaded SQLAlchemy cannot have raised one, so it is not
    imported here just to ask."""
    errors = sys.modules.get("sqlalchemy.exc")
    return errors is not None and isinstance(exc, errors.SQLAlchemyError)


if __name__ == "__main__":
    run()
