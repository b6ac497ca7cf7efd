"""Exit statuses by one rule (docs/cli-reference.md, "Exit statuses"): 2 for a command line that is wrong whatever
the ledger holds (ids out of range included: never a traceback), 1 for what the ledger refuses or a failure, 3 for
a history `audit verify` finds edited."""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledger.cli.events import EVENT_KINDS
from tests.cli.test_truthful_cli import dump
from tests.conftest import REPO, Cli, _run_in_process

TOO_BIG = str(2**63)  # one past the largest id a database holds
DAILY_SALES = (REPO / "examples" / "dags" / "daily_sales.py").read_text()


def table_examples() -> list[tuple[int, str]]:
    """(status, command) for each example of the exit status table that is a `ledger ...` command."""
    text = (REPO / "docs" / "cli-reference.md").read_text()
    section = text.split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    found = [(int(row.split("|")[1]), command) for row in rows
             for command in re.findall(r"`(ledger [^`]+)`", row.split("|")[3])]
    assert {status for status, _ in found} == {0, 1, 2, 3}, found
    return found


def test_each_example_of_the_exit_status_table_exits_with_its_status(ready_cli: Cli) -> None:
    """On the ledger the table's examples assume: the DAG daily_sales, its run 1 cancelled before it ran."""
    cli = ready_cli
    cli.write_dag("daily_sales.py", DAILY_SALES)
    cli.ok("trigger", "daily_sales", "--logical-date", "2024-03-01")
    cli.ok("runs", "cancel", "1")
    before = dump(cli)
    examples = table_examples()
    for status, command in [e for e in examples if e[0] != 3]:
        args = shlex.split(command)[1:]
        result = cli.run(*args) if status == 0 else cli.fails(*args)  # fails: one line on stderr, no traceback
        assert result.exit_code == status, (command, result.exit_code, result.output)
        if status == 2:
            assert result.stderr.startswith("Error: ledger") and "--help`)" in result.stderr, result.stderr
    assert dump(cli) == before  # the refusals and usage errors changed nothing
    with sqlite3.connect(cli.home / "ledger.db") as db:  # the edit the examples of 3 assume, made past ledger
        db.execute("UPDATE dag_run SET state = 'success' WHERE id = 1")
    for command in [command for status, command in examples if status == 3]:
        result = cli.fails(*shlex.split(command)[1:])  # the breaks on stdout, their count on stderr
        assert result.exit_code == 3 and result.stdout.startswith("daily_sales: run 1 is not what"), result.output


ID_COMMANDS = [
    ("runs", "show", TOO_BIG), ("runs", "cancel", TOO_BIG), ("runs", "mark-success", TOO_BIG),
    ("runs", "mark-failed", TOO_BIG), ("tasks", "clear", "d", TOO_BIG), ("tasks", "logs", "d", TOO_BIG, "a"),
    ("tasks", "xcom", "d", TOO_BIG, "a"), ("tasks", "rendered", "d", TOO_BIG, "a"),
    ("tasks", "mark", "d", TOO_BIG, "a", "--state", "success"), ("backfill", "show", TOO_BIG),
    ("backfill", "cancel", TOO_BIG), ("backfill", "resume", TOO_BIG), ("events", "--run", TOO_BIG),
    ("callbacks", "--run", TOO_BIG),
]
COUNT_COMMANDS = [
    ("events", "--limit", TOO_BIG), ("callbacks", "--limit", TOO_BIG), ("signal", "list", "--since", TOO_BIG),
    ("signal", "list", "--limit", TOO_BIG), ("pools", "set", "p", TOO_BIG), ("tasks", "logs", "d", "1", "a", "--try",
                                                                               TOO_BIG),
    ("tasks", "logs", "d", "1", "a", "--map-index", TOO_BIG), ("scheduler", "--parallelism", TOO_BIG),
    ("scheduler", "--num-runs", TOO_BIG),
    ("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--max-active-runs", TOO_BIG),
    ("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--parallelism", TOO_BIG),
    ("datasets", "show", "s3://bucket/a", "--limit", TOO_BIG),
]


@pytest.mark.parametrize("args", [pytest.param(a, id=" ".join(a[:2])) for a in ID_COMMANDS + COUNT_COMMANDS])
def test_an_id_or_count_beyond_64_bits_is_a_usage_error_never_a_traceback(ready_cli: Cli, args: tuple[str, ...]) \
        -> None:
    result = ready_cli.fails(*args)
    assert result.exit_code == 2, result.output
    assert str(2**63 - 1) in result.stderr, result.stderr  # the message names the largest number taken


def test_the_largest_limit_a_listing_takes_lists_everything(ready_cli: Cli) -> None:
    ready_cli.write_dag("daily_sales.py", DAILY_SALES)
    ready_cli.ok("trigger", "daily_sales", "--logical-date", "2024-03-01")
    (run,) = ready_cli.json("runs", "list", "--limit", str(2**63 - 1))
    assert run["dag_id"] == "daily_sales"


@pytest.mark.parametrize("args", [
    pytest.param(("runs", "show", "abc"), id="non-integer-run"),
    pytest.param(("runs", "show", "0"), id="run-0"),
    pytest.param(("tasks", "clear", "d", "1.5"), id="fractional-run"),
    pytest.param(("backfill", "show", "abc"), id="non-integer-backfill"),
    pytest.param(("events", "--run", "x"), id="non-integer-run-filter"),
])
def test_an_id_that_is_not_a_whole_number_from_1_is_a_usage_error(cli: Cli, args: tuple[str, ...]) -> None:
    """Checked before the database is opened: there is none here."""
    assert cli.fails(*args).exit_code == 2


def test_an_unknown_event_kind_is_a_usage_error_that_names_the_kinds(ready_cli: Cli) -> None:
    result = ready_cli.fails("events", "--kind", "run_created", "--kind", "nonsense")
    assert result.exit_code == 2
    assert "no event kind 'nonsense'" in result.stderr and "run_cancelled" in result.stderr
    assert ready_cli.json("events", "--kind", "run_cancelled") == []  # a known kind not yet recorded: empty


@pytest.mark.parametrize("args", [
    pytest.param(("backfill", "daily_sales", "--start", "2024-03-01", "--end", "2024-03-02", "--reprocess", "bogus"),
                 id="reprocess"),
    pytest.param(("backfill", "daily_sales", "--start", "2024-13-45", "--end", "2024-03-02"), id="bad-date"),
    pytest.param(("timeline", "daily_sales", "--start", "2024-03-03", "--end", "2024-03-01"), id="backwards"),
    pytest.param(("trigger", "daily_sales", "--conf", "{"), id="bad-json"),
    pytest.param(("scheduler", "--executor", "kubernetes"), id="executor"),
    pytest.param(("signal", "send", "bad key", "v"), id="signal-key"),
    pytest.param(("dags", "test", "daily_sales", "--replace"), id="replace-without-record"),
    pytest.param(("runs", "list", "--state", "bogus"), id="runs-state"),
    pytest.param(("runs", "list", "--type", "bogus"), id="runs-type"),
    pytest.param(("runs", "list", "--start", "2024-03-03", "--end", "2024-03-01"), id="runs-backwards"),
])
def test_usage_errors_exit_2_and_change_nothing(ready_cli: Cli, args: tuple[str, ...]) -> None:
    ready_cli.write_dag("daily_sales.py", DAILY_SALES)
    ready_cli.ok("dags", "list")  # registered: a date range is read in the DAG's timezone
    before = dump(ready_cli)
    assert ready_cli.fails(*args).exit_code == 2
    assert dump(ready_cli) == before


# values for the required options of the commands that take a number, so that only the number is wrong
_REQUIRED = {"--start": "2024-03-01", "--end": "2024-03-02", "--state": "success", "--uri": "pg://h/db"}


def _number_parameters() -> list[tuple[tuple[str, ...], str]]:
    """(command path, parameter name) of every integer argument and option of every `ledger` command."""
    import typer

    from ledger.cli.app import app

    found = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))
        for param in getattr(command, "params", []) if not hasattr(command, "commands") else []:
            if int in (param.type_descriptor.annotation, *getattr(param.type_descriptor.annotation, "__args__", ())):
                found.append((path, param.name))

    walk(typer.main.get_command(app), ())
    return found


def _command_line(path: tuple[str, ...], number: str) -> list[str]:
    """The command with TOO_BIG for its parameter `number` and a well-formed value for every other required one."""
    import typer

    from ledger.cli.app import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    args = list(path)
    for param in command.params:
        is_int = int in (param.type_descriptor.annotation, *getattr(param.type_descriptor.annotation, "__args__", ()))
        value = TOO_BIG if param.name == number else ("1" if is_int else _REQUIRED.get(param.opts[0], "x"))
        if param.opts[0].startswith("-"):
            if param.name == number or param.required:
                args += [param.opts[0], value]
        elif param.required or param.name == number:
            args.append(value)
    return args


NUMBER_PARAMETERS = _number_parameters()


def test_every_command_that_takes_a_number_is_found() -> None:
    names = {(" ".join(path), name) for path, name in NUMBER_PARAMETERS}
    assert {("runs show", "run"), ("datasets show", "limit"), ("backfill create", "max_active_runs"),
            ("webserver", "port"), ("dags next-runs", "n")} <= names and len(names) > 30, names


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("path", "number"), [pytest.param(p, n, id=f"{' '.join(p)} {n}")
                                              for p, n in NUMBER_PARAMETERS])
def test_every_number_any_command_takes_is_range_checked_before_anything_else(cli: Cli, path: tuple[str, ...],
                                                                               number: str) -> None:
    """Every integer argument and option, found by walking the commands (a new one is checked without being
    listed here): beyond 64 bits it is a usage error, in one line, before the database (there is none) is
    opened. In this process, whatever the command: a usage error ends it before it starts anything."""
    args = _command_line(path, number)
    result = _run_in_process(args, cli.env, None, cli.home)
    assert result.exit_code == 2, (args, result.output)
    assert result.stderr.startswith("Error: ledger") and len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("args", [
    pytest.param(("users", "create", "x", "--role", "boss"), id="role"),
    pytest.param(("users", "set-role", "x", "boss"), id="set-role"),
    pytest.param(("users", "create", "two words"), id="user-name"),
    pytest.param(("users", "token", "x", "--name", "two words"), id="token-name"),
    pytest.param(("variables", "set", "a/b", "v"), id="variable-key"),
    pytest.param(("connections", "add", "c", "--uri", "nothing"), id="uri"),
    pytest.param(("connections", "add", "a b", "--uri", "pg://h/db"), id="connection-id"),
    pytest.param(("db", "downgrade", "zzzz"), id="revision"),
])
def test_a_name_role_uri_or_revision_of_the_wrong_form_is_a_usage_error(cli: Cli, args: tuple[str, ...]) -> None:
    """Checked before the database is opened (there is none here), as any value of the wrong form."""
    result = cli.fails(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: ledger {args[0]} {args[1]}: "), result.stderr


def test_refusals_exit_1(ready_cli: Cli) -> None:
    ready_cli.write_dag("daily_sales.py", DAILY_SALES)
    for args in (("trigger", "nosuchdag"), ("backfill", "show", "7"), ("events", "--run", "7"),
                 ("trigger", "daily_sales", "--logical-date", "2024-01-01")):
        assert ready_cli.fails(*args).exit_code == 1, args


# event kinds the code writes as literals: events.record(session, "kind", ...), dict(..., kind="kind", ...),
# {"kind": "kind", ...} next to record_many, and the two branches of `"a" if ... else "b"`
_RECORDED = re.compile(r'(?:\.record\(\s*session,\s*|kind=|kind = |"kind": )"([a-z_]+)"'
                       r'(?:\s+if\s[^"]*else\s+"([a-z_]+)")?')
_NOT_EVENTS = {"started", "finished", "python", "bash", "spark", "meta", "add",  # executors, task kinds, diff lines
               "branch_datetime", "branch_day_of_week", "sensor", "external_task_marker", "operator",
               "python_virtualenv", "external_python"}


def test_the_event_kinds_cover_every_kind_the_code_records() -> None:
    recorded: set[str] = set()
    for folder in ("ledger", "scheduler", "backfill", "cli"):
        for path in Path(REPO, folder).rglob("*.py"):
            for match in _RECORDED.finditer(path.read_text()):
                recorded.update(k for k in match.groups() if k)
    recorded -= _NOT_EVENTS
    assert {"run_created", "run_cancelled", "lock_taken", "dag_paused", "try_not_started"} <= recorded
    assert recorded - EVENT_KINDS == set(), "add these kinds to cli/events.py's EVENT_KINDS"
