"""Writes docs/cli-reference.md from the real `--help` of every ledger command.

    python docs/generate_cli_reference.py          # rewrite the file
    python docs/generate_cli_reference.py --check  # exit 1 if the file is out of date (a test runs this)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.update(COLUMNS="100", NO_COLOR="1", TERM="dumb", _TYPER_FORCE_DISABLE_TERMINAL="1")

from typer.main import get_command
from typer.testing import CliRunner

from cli.app import app

TARGET = Path(__file__).resolve().parent / "cli-reference.md"


def commands(group: Any, path: list[str]) -> list[list[str]]:
    found = [path]
    for name in sorted(getattr(group, "commands", {})):
        found.extend(commands(group.commands[name], [*path, name]))
    return found


def render() -> str:
    runner = CliRunner()
    parts = ["# CLI reference", "",
             "Generated from the real `--help` output by `python docs/generate_cli_reference.py`; a test fails",
             "when a command is missing or out of date. Every listing takes `--json`.", ""]
    for path in commands(get_command(app), []):
        result = runner.invoke(app, [*path, "--help"], prog_name="ledger", env={"COLUMNS": "100"})
        title = " ".join(["ledger", *path])
        text = "\n".join(line.rstrip() for line in result.output.strip().splitlines())
        parts += [f"## `{title}`", "", "```text", text, "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    fresh = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != fresh:
            print(f"{TARGET} is out of date; run python docs/generate_cli_reference.py", file=sys.stderr)
            sys.exit(1)
    else:
        TARGET.write_text(fresh)
