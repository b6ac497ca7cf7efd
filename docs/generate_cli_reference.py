"""Writes docs/cli-reference.md from the real `--help` of every ledger command.

    python docs/generate_cli_reference.py          # rewrite the file
    python docs/generate_cli_reference.py --check  # exit 1 if the file is out of date (a test runs this)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.update(COLUMNS="100", NO_COLOR="1", TERM="dumb", _TYPER_FORCE_DISABLE_TERMINAL="1")

from generated import write_or_check
from typer.main import get_command
from typer.testing import CliRunner

from ledger.cli.app import app

TARGET = Path(__file__).resolve().parent / "cli-reference.md"


def commands(group: Any, path: list[str]) -> list[list[str]]:
    found = [path]
    for name in sorted(getattr(group, "commands", {})):
        found.extend(commands(group.commands[name], [*path, name]))
    return found


# The one rule for exit statuses: (status, meaning, examples). The examples in backticks that start with `ledger`
# are run by tests/cli/test_exit_statuses.py on a ledger holding the DAG daily_sales and its run 1, cancelled:
# each must exit with its row's status (those of 3 after the test has edited run 1's state with sqlite3).
EXIT_RULE = """A command that fails prints one line on stderr, starting with `Error:`, and changes nothing. The rule:
if the command line alone shows the mistake, whatever the ledger holds, it is a usage error (2); if it takes
the ledger's contents to refuse it, it is a refusal (1). So a malformed or out-of-range run id is 2 and a
well-formed one that does not exist is 1; a backwards date range is 2 and a date before the DAG's start is 1.
`ledger audit verify` that finds the history edited is neither: it exits 3, so that a job running it tells an
edited ledger from a misspelt DAG name (1)."""
EXIT_STATUSES = [
    ("0", "Done (a listing may be empty).", ["`ledger runs show 1`", "`ledger events --kind run_cancelled`"]),
    ("1", "Refused or failed: the command line is well formed, but the ledger refuses it for what it holds (an "
          "unknown DAG, run, backfill, task, version or dataset; a run or backfill in the wrong state; a date "
          "outside the DAG's start and end; a `--conf` the DAG's params refuse), the database is missing, not "
          "upgraded or failing, a setting in the environment that cannot be used (`LEDGER_PARALLELISM=many`), or the "
          "work failed (a task of `backfill` or `dags test`).",
     ["`ledger timeline nosuchdag`", "`ledger runs show 999`", "`ledger runs cancel 1` (already finished)",
      "`ledger tasks logs daily_sales 1 extract` (never ran)",
      "`ledger trigger daily_sales --logical-date 2020-01-01` (before the DAG starts)"]),
    ("2", "Usage error: an unknown command or option, a missing argument, a value of the wrong form (a "
          "non-integer id, a bad date, bad JSON, an unknown choice, a name or URI that could never be valid), an "
          "id or number out of range (ids are 1 to 9223372036854775807), options that do not go together, a "
          "backwards date range.",
     ["`ledger runs show abc`", "`ledger runs show 9223372036854775808`", "`ledger events --kind nonsense`",
      "`ledger backfill daily_sales --start 2024-03-03 --end 2024-03-01`",
      "`ledger backfill daily_sales --start 2024-03-01 --end 2024-03-02 --reprocess bogus`",
      "`ledger trigger daily_sales --conf '[1]'`", "`ledger dags show daily_sales --file x`",
      "`ledger users create ada --role boss`", "`ledger nosuchcommand`"]),
    ("3", "Tampering found: `audit verify` (or `audit verify --bundle`) ran and something does not verify, one "
          "line per break on stdout (the history was edited past ledger).",
     ["`ledger audit verify daily_sales` (after `UPDATE dag_run SET state = 'success'` made with sqlite3)"]),
    ("128 + N", "Interrupted by signal N, with how to resume: a backfill stopped by Ctrl-C (130) or SIGTERM (143).",
     []),
]


def exit_statuses() -> str:
    rows = [f"| {status} | {meaning} | {', '.join(examples)} |" for status, meaning, examples in EXIT_STATUSES]
    return "\n".join(["## Exit statuses", "", EXIT_RULE, "", "| Status | Meaning | Examples |", "|---|---|---|",
                      *rows, ""])


def render() -> str:
    runner = CliRunner()
    parts = ["# CLI reference", "",
             "Generated from the real `--help` output by `python docs/generate_cli_reference.py`; a test fails",
             "when a command is missing or out of date. Every listing takes `--json`.", "", exit_statuses()]
    for path in commands(get_command(app), []):
        if path:
            output = runner.invoke(app, [*path, "--help"], prog_name="ledger", env={"COLUMNS": "100"}).output
        else:  # the list of commands as `ledger --help` prints it (its own layout, decision 0297)
            output = subprocess.run([sys.executable, "-c", "from ledger.cli.app import run; run()", "--help"],
                                    capture_output=True, text=True, check=True).stdout
        title = " ".join(["ledger", *path])
        text = "\n".join(line.rstrip() for line in output.strip().splitlines())
        parts += [f"## `{title}`", "", "```text", text, "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(write_or_check(TARGET, render(), sys.argv[1:], "docs/generate_cli_reference.py"))
