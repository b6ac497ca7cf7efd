"""Writes the command outputs shown in docs/backfill.md from a real run of the real `ledger` command.

    python docs/generate_examples.py          # run the scenario, rewrite the generated blocks
    python docs/generate_examples.py --check  # exit 1 when a generated block is out of date (a test runs this)

Each block between `<!-- generated: NAME -->` and `<!-- end generated -->` is the output of the commands
that SCENARIO lists under NAME, run in order on a fresh LEDGER_HOME with the example DAG
examples/dags/daily_sales.py (COLUMNS=110). Values that change from one run to the next (the wall-clock
time of a change, elapsed time, the host name) are masked before comparing, so --check fails only when
what the commands print has really changed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "backfill.md"
LEDGER = str(Path(sys.executable).with_name("ledger"))

# (block name, commands whose output it shows); commands with a leading "#" run but are not shown
SCENARIO: list[tuple[str, list[str]]] = [
    ("setup", ["# db upgrade", "# dags list", "# scheduler --exit-when-idle"]),
    ("plan", ["backfill daily_sales --start 2024-03-02 --end 2024-03-04 --dry-run"]),
    ("plan-json", ["backfill daily_sales --start 2024-03-02 --end 2024-03-02 --dry-run --json"]),
    ("rerun", ["backfill daily_sales --start 2024-03-03 --end 2024-03-04 --reprocess completed --yes"]),
    ("new-version", ["# @edit",
                     "# backfill daily_sales --start 2024-03-04 --end 2024-03-04 --reprocess completed --yes"]),
    ("timeline", ["timeline daily_sales --all --start 2024-03-02 --end 2024-03-05"]),
    ("events", ["events --dag daily_sales --kind backfill_created --kind run_overridden --json"]),
    ("list", ["backfill list"]),
    ("refusals", ["backfill daily_sales --start 2024-03-08 --end 2024-03-10",
                  "backfill daily_sales --start 2024-03-03 --end 2024-03-01"]),
]

VOLATILE = [
    (re.compile(r"20(2[5-9]|[3-9]\d)-\d\d-\d\d"), "<today>"),  # a table may wrap the time onto its own line
    (re.compile(r"\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"(elapsed|remaining) \d\d:\d\d:\d\d"), r"\1 <t>"),
    (re.compile(r"@[\w.-]+"), "@<host>"),
    (re.compile(r"[─━]+"), "─"),  # table widths follow the masked values
    (re.compile(r" +"), " "),
]


def mask(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def run_scenario() -> dict[str, str]:
    home = Path(tempfile.mkdtemp(prefix="ledger-docs-"))
    try:
        (home / "dags").mkdir()
        shutil.copy(REPO / "examples" / "dags" / "daily_sales.py", home / "dags" / "daily_sales.py")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(LEDGER_HOME=str(home), COLUMNS="110", NO_COLOR="1", LEDGER_POLL_INTERVAL="0.2",
                   PYTHONPATH=str(REPO))
        blocks: dict[str, str] = {}
        for name, commands in SCENARIO:
            shown: list[str] = []
            for command in commands:
                hidden = command.startswith("# ")
                command = command.removeprefix("# ")
                if command == "@edit":  # a new version of the DAG: one more task
                    path = home / "dags" / "daily_sales.py"
                    path.write_text(path.read_text() + '    load >> BashTask("notify", "echo done")\n')
                    continue
                done = subprocess.run([LEDGER, *command.split()], capture_output=True, text=True, env=env,
                                      cwd=home, timeout=300)
                if not hidden:
                    output = (done.stdout + done.stderr).rstrip()
                    shown.append(f"$ ledger {command}\n" + "\n".join(line.rstrip() for line in output.splitlines()))
            if shown:
                blocks[name] = "```text\n" + "\n".join(shown) + "\n```"
        return blocks
    finally:
        shutil.rmtree(home, ignore_errors=True)


BLOCK = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- end generated -->", re.S)


def rewrite(doc: str, blocks: dict[str, str]) -> str:
    def put(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            raise SystemExit(f"docs/backfill.md names a block {name!r} that the scenario does not make")
        return f"<!-- generated: {name} -->\n{blocks[name]}\n<!-- end generated -->"

    return BLOCK.sub(put, doc)


def main(argv: list[str]) -> int:
    doc = DOC.read_text()
    fresh = rewrite(doc, run_scenario())
    if "--check" in argv:
        if mask(fresh) != mask(doc):
            sys.stderr.write("docs/backfill.md is out of date: run `python docs/generate_examples.py`\n")
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
