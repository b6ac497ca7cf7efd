"""A DAGs folder's helper modules may take the names of ledger's own folders: `scheduler`, `backfill`, `cli` and
`migrations`, as modules or as packages. ledger imports its folders as `ledger.scheduler` and so on (decision 0296),
so a DAG file's `import scheduler` gets the user's module wherever the DAG's code runs: parsing, the scheduler's
tries (from the run's pinned code), `ledger dags test`, and a Celery worker that has no DAGs folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import launcher
from tests.celery_cluster import Cluster
from tests.conftest import LEDGER, Cli

NAMES = ("scheduler", "backfill", "cli", "migrations")

DAG = """
import pendulum
import scheduler, backfill, cli, migrations
from ledger import DAG, PythonTask

AT_PARSE = [scheduler.X, backfill.X, cli.X, migrations.X]


def show():
    import scheduler, backfill, cli, migrations  # imported when the task runs, from the run's pinned code
    print("helpers", scheduler.X, backfill.X, cli.X, migrations.X, "parsed", *AT_PARSE)


with DAG("helpers", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("show", show)
"""

EXPECTED = "helpers user-scheduler user-backfill user-cli user-migrations parsed " \
           "user-scheduler user-backfill user-cli user-migrations"


def write_helpers(dags: Path, form: str) -> None:
    """Each of the four names as a module (`scheduler.py`) or as a package (`scheduler/__init__.py`)."""
    dags.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        if form == "module":
            (dags / f"{name}.py").write_text(f"X = 'user-{name}'\n")
        else:
            (dags / name).mkdir()
            (dags / name / "__init__.py").write_text(f"X = 'user-{name}'\n")
    (dags / "helpers.py").write_text(DAG)


@pytest.mark.parametrize("form", ["module", "package"])
def test_a_dags_folders_helpers_named_like_ledgers_folders_are_the_users_in_the_scheduler_and_dags_test(
        ready_cli: Cli, form: str) -> None:
    cli = ready_cli
    write_helpers(cli.dags, form)
    listed = cli.json("dags", "list")
    assert [d["dag_id"] for d in listed] == ["helpers"], listed
    cli.ok("trigger", "helpers", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    assert cli.json("runs", "show", "1")["state"] == "success"
    assert EXPECTED in cli.ok("tasks", "logs", "helpers", "1", "show")
    tested = cli.run("dags", "test", "helpers", "--logical-date", "2024-03-02")
    assert tested.exit_code == 0, tested.output
    assert EXPECTED in tested.output


def test_a_dags_folders_helpers_named_like_ledgers_folders_are_the_users_on_a_celery_worker(cluster: Cluster) -> None:
    write_helpers(cluster.home / "dags", "module")

    def ledger(*args: str) -> subprocess.CompletedProcess[str]:
        done = launcher.run([LEDGER, *args], env=cluster.scheduler_env(), cwd=cluster.home, capture_output=True,
                            text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    ledger("trigger", "helpers")
    cluster.start_webserver()
    cluster.start_worker("w1")  # no DAGs folder: it fetches the run's pinned code from the webserver
    ledger("scheduler", "--executor", "celery", "--exit-when-idle")
    assert json.loads(ledger("runs", "show", "1", "--json").stdout)["state"] == "success"
    assert EXPECTED in ledger("tasks", "logs", "helpers", "1", "show").stdout
