"""The docs show the real commands: the CLI reference must match every command's --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_cli_reference_covers_every_command_and_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "docs/generate_cli_reference.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_readme_gives_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def test_the_backfill_guide_shows_what_the_commands_print_today() -> None:
    """docs/backfill.md's command outputs are written by docs/generate_examples.py from a real run; this runs
    the scenario again and compares (times of day and host names masked)."""
    result = subprocess.run([sys.executable, "docs/generate_examples.py", "--check"], cwd=REPO, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout


def test_docs_show_the_current_migration_head_and_cite_only_files_that_exist() -> None:
    import re

    from migrations.head import HEAD

    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for revision in re.findall(r"from empty to (\d{4})", text):
            assert revision == HEAD, f"{doc.name} shows an upgrade to {revision}; the head is {HEAD}"
        for path in re.findall(r"`((?:benchmarks|docs|examples|ledger|scheduler|backfill|cli|tests)/[\w./-]+)`",
                               text):
            assert (REPO / path).exists(), f"{doc.name} cites {path}, which does not exist"
