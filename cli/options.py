"""Options shared by several commands, and the checks that make a bad command line a usage error (exit 2)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer

from ledger.core.dates import parse_user_date
from ledger.core.errors import InvalidInput

# ids are 64-bit signed integers in SQLite and PostgreSQL (BIGINT), and the first one is 1; a count or a number
# given on the command line is held to the same range, whatever it is compared with or written to
MAX_ID = 2**63 - 1


def id_parser(what: str) -> Callable[[str], int]:
    """A parser for an id argument or option: a whole number from 1 to MAX_ID, else a usage error (exit 2)
    naming the range; never an id the database cannot hold."""

    def parse(text: str | int) -> int:
        if isinstance(text, int):  # a default, or a value already parsed
            return text
        try:
            value = int(text.strip())
        except ValueError:
            raise typer.BadParameter(f"{what} must be a whole number, not {text!r}") from None
        if not 1 <= value <= MAX_ID:
            raise typer.BadParameter(f"{what} {value} is out of range: ids go from 1 to {MAX_ID}")
        return value

    return parse


def within_range(ctx: typer.Context, param: typer.CallbackParam, value: int | None) -> int | None:
    """A count or number option (its lower bound is the option's min=) is at most MAX_ID: a usage error otherwise.
    A callback, not max=: the bound would crowd every option's help."""
    if value is not None and value > MAX_ID:
        raise typer.BadParameter(f"{value} is out of range: the largest number ledger takes is {MAX_ID}")
    return value


def checked_date(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """A date option's text must read as an ISO date or datetime (a usage error otherwise, exit 2); the command
    reads it again in the DAG's timezone."""
    if value is not None and not ctx.resilient_parsing:
        what = (param.opts or [param.name or "date"])[0]
        try:
            parse_user_date(value, timezone="UTC", what=what)
        except InvalidInput as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


class UsageProblem(typer.BadParameter):
    """A command line that is wrong whatever the ledger holds, said as it is (a usage error through typer's public
    class: exit status 2, and the command it belongs to is filled in as for a bad option value)."""

    def format_message(self) -> str:
        return self.message


def usage_error(message: str) -> UsageProblem:
    """A command line that is wrong whatever the ledger holds (options that do not go together, a backwards
    range): one line and exit status 2, like a bad option value."""
    return UsageProblem(message)


@contextlib.contextmanager
def form_checked() -> Iterator[None]:
    """Around the ledger's checks of a value's form (a name, a role, a URI), made before the database is opened:
    what they refuse is a usage error (exit 2), as it would be refused whatever the ledger holds."""
    try:
        yield
    except InvalidInput as exc:
        raise usage_error(str(exc)) from None


DagsFolder = Annotated[Path | None, typer.Option("--dags-folder", help="Folder of DAG files "
                       "(default: $LEDGER_DAGS_FOLDER or $LEDGER_HOME/dags).", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DagId = Annotated[str, typer.Argument(help="The DAG id.", show_default=False)]
Reason = Annotated[str | None, typer.Option("--reason", help="Why (kept in the event, with who did it).",
                                            show_default=False)]
RunId = Annotated[int, typer.Argument(help="The run id.", parser=id_parser("run id"),
                                      show_default=False)]
BackfillId = Annotated[int, typer.Argument(help="The backfill id.", parser=id_parser("backfill id"),
                                           show_default=False)]
Parallelism = Annotated[int | None, typer.Option(min=1, callback=within_range, help="Task tries running at once.")]


def reason_text(text: str | None) -> str | None:
    """An operator's --reason on one line; an empty one is refused."""
    if text is not None and not text.strip():
        raise typer.BadParameter("--reason must not be empty", param_hint="'--reason'")
    return None if text is None else " ".join(text.split())


def check_environment() -> None:
    """Before a long-running command starts (scheduler, webserver, worker): every `LEDGER_*` setting checked at
    once, one line per bad value (then exit 1, having started nothing), one warning per name that is not
    ledger's (a typo; docs/settings.md lists the settings)."""
    from rich.console import Console

    from ledger.infra.settings import bad_values, unknown_names

    err = Console(stderr=True, soft_wrap=True, highlight=False)
    for line in unknown_names():
        err.print(f"Warning: {line}", markup=False)
    bad = bad_values()
    for line in bad:
        err.print(f"Error: {line}", markup=False)
    if bad:
        raise typer.Exit(1)
