"""The scenario tests run database-only commands through the CLI's entry point in the test process
(tests/conftest.py, IN_PROCESS): what they see must be what the `ledger` console script prints."""

from __future__ import annotations

import sqlite3
import subprocess

from tests.conftest import DAILY_DAG, LEDGER, Cli, _run_in_process


def both(cli: Cli, *args: str, input: str | None = None) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    inside = _run_in_process(list(args), cli.env, input, cli.home)
    proc = subprocess.run([LEDGER, *args], capture_output=True, text=True, env=cli.env, input=input, cwd=cli.home,
                          timeout=300)
    return (inside.exit_code, inside.stdout, inside.stderr), (proc.returncode, proc.stdout, proc.stderr)


def test_in_process_commands_print_and_exit_as_the_console_script_does(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("dags", "list")
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")  # in process: a run to show
    for args in [("timeline", "daily", "--json"), ("runs", "show", "1", "--json"), ("pools", "list"),
                 ("runs", "show", "999"),  # refused: one line, exit 1
                 ("timeline", "nope"),  # an unknown DAG
                 ("events", "--limit", "x"),  # a usage error: exit 2
                 ("signal", "send", "bad key!", "v")]:
        inside, outside = both(cli, *args)
        assert inside == outside, args
    assert both(cli, "runs", "show", "999")[0][0] == 1


def test_in_process_commands_see_the_tests_home_and_leave_the_test_process_as_it_was(ready_cli: Cli) -> None:
    import os
    import sys

    cli = ready_cli
    before = (dict(os.environ), os.getcwd(), sys.stdin, sys.stdout, sys.stderr)
    result = cli.run("pools", "set", "spark", "2")
    assert result.exit_code == 0, result.output
    assert (dict(os.environ), os.getcwd(), sys.stdin, sys.stdout, sys.stderr) == before
    assert "spark" in cli.ok("pools", "list")
    last = sqlite3.connect(str(cli.home / "ledger.db"))  # the last connection to close removes -wal and -shm:
    last.execute("SELECT count(*) FROM sqlite_master").fetchall()
    last.close()
    assert not list(cli.home.glob("ledger.db-*"))  # so the commands left none open
