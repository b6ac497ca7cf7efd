"""The docs show the real commands: the CLI reference must match every command's --help, and every output a
guide shows must be what its command prints today (docs/generate_examples.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.scenario  # every command's --help, each a `ledger` process
def test_the_cli_reference_covers_every_command_and_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "docs/generate_cli_reference.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_readme_gives_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


@pytest.mark.scenario
@pytest.mark.timeout(1800)  # a real scenario: about 30 s on a healthy machine, over 10 min on a loaded one
def test_the_backfill_guide_shows_what_the_commands_print_today() -> None:
    """docs/backfill.md's command outputs are written by docs/generate_examples.py from a real run; this runs
    the scenario again and compares (times of day and host names masked)."""
    _check("backfill")


def _check(*docs: str) -> None:
    """docs/generate_examples.py --check DOC..., in this process (its commands forked from this process's warm
    interpreters, as the scenario tests' are): the docs' outputs must be what the commands print now."""
    spec = importlib.util.spec_from_file_location("generate_examples", REPO / "docs" / "generate_examples.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        status = generator.main(["--check", *docs])
    assert status == 0, said.getvalue()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 17 commands and a scheduler scraped for metrics: 20 s on a healthy machine
def test_the_operations_guide_shows_what_the_commands_print_today() -> None:
    """docs/operations.md: the example orders_alerts DAG's version, a failing run with its missed deadline and
    its callbacks' outcomes, the metrics of a scheduler, the operator controls and their refusals, `dags test`."""
    _check("operations")


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 12 commands, 12 s on a healthy machine
def test_the_authoring_guide_shows_what_the_commands_print_today() -> None:
    """docs/authoring.md: variables and connections, then the example flow DAG's values, templates and params."""
    _check("authoring")


@pytest.mark.scenario
@pytest.mark.timeout(1800)  # a few seconds on a healthy machine
def test_the_scheduler_and_porting_guides_show_what_the_commands_print_today() -> None:
    """docs/scheduler.md (a scheduler's log of a catch-up) and docs/from-airflow.md (the table of Airflow's modules,
    generated from ledger's namespace, and `ledger dags test` of the Airflow example, unchanged)."""
    _check("scheduler", "from-airflow")


@pytest.mark.scenario
@pytest.mark.timeout(1800)  # about 8 s on a healthy machine
def test_the_web_guide_shows_what_the_server_answers_today() -> None:
    """docs/web.md's command outputs: a real `ledger webserver` asked by curl, and its refusal of 0.0.0.0.
    Skipped without curl and jq, except in CI (CI=true), where .ci/run installs them."""
    if not (shutil.which("curl") and shutil.which("jq")):
        if os.environ.get("CI") == "true":
            pytest.fail("curl or jq is missing in CI: .ci/run installs them")
        pytest.skip("docs/web.md's examples use curl and jq")
    _check("web")


# docs/tutorial.md (`make demo`'s output) is checked by tests/spark/test_example_pipeline.py, which also checks the
# data and records the demo leaves: one run of the demo for both.


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_spark_guide_shows_what_the_pipeline_prints_on_postgresql_and_spark_connect() -> None:
    """docs/spark.md's session (PostgreSQL, a Spark Connect server) is run again and compared (ports masked)."""
    _check("spark")


def test_docs_show_the_current_migration_head_and_cite_only_files_that_exist() -> None:
    import re

    from ledger.store.schema import HEAD

    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for revision in re.findall(r"from empty to (\d{4})", text):
            assert revision == HEAD, f"{doc.name} shows an upgrade to {revision}; the head is {HEAD}"
        for path in re.findall(r"`((?:benchmarks|docs|examples|ledger|scheduler|backfill|cli|tests)/[\w./-]+)`",
                               text):
            assert (REPO / path).exists(), f"{doc.name} cites {path}, which does not exist"


def test_the_decisions_index_lists_every_decision_file() -> None:
    result = subprocess.run([sys.executable, "docs/generate_decisions_index.py", "--check"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def test_every_relative_link_in_the_docs_reaches_a_file_that_exists() -> None:
    import re

    broken = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):
                continue
            if not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)
