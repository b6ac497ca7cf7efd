"""The docs show the real commands: the CLI reference must match every command's --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_the_cli_reference_covers_every_command_and_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "docs/generate_cli_reference.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_readme_gives_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


@pytest.mark.timeout(1800)  # a real scenario: about 30 s on a healthy machine, over 10 min on a loaded one
def test_the_backfill_guide_shows_what_the_commands_print_today() -> None:
    """docs/backfill.md's command outputs are written by docs/generate_examples.py from a real run; this runs
    the scenario again and compares (times of day and host names masked)."""
    _check("backfill")


def _check(doc: str) -> None:
    """Run docs/generate_examples.py --check DOC: the doc's outputs must be what the commands print now."""
    result = subprocess.run([sys.executable, "docs/generate_examples.py", "--check", doc], cwd=REPO,
                            capture_output=True, text=True, timeout=1700)
    assert result.returncode == 0, result.stderr + result.stdout


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_tutorial_shows_what_make_demo_prints_today() -> None:
    """docs/tutorial.md is `make demo`'s output (examples/demo.py, with Spark); this runs the demo again."""
    _check("tutorial")


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_spark_guide_shows_what_the_pipeline_prints_on_postgresql_and_spark_connect() -> None:
    """docs/spark.md's session (PostgreSQL, a Spark Connect server) is run again and compared (ports masked)."""
    _check("spark")


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
