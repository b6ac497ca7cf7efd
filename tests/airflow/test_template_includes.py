"""`{% include %}`, `{% import %}` and `{% extends %}` in Airflow templates: the file named is found as Airflow's
DAG.get_template_env finds it (the DAG file's folder, then its template_searchpath), from a template file and from an
inline template alike. A file of the DAGs folder that a template includes is the DAG's code: its version keeps it, a
change to it makes a new version, and a try renders the version's copy. One found nowhere fails the try in one line
naming the folders looked in."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.describe import version_of
from tests.airflow.test_template_files import HEAD  # (its SqlPrinter operator prints its sql)
from tests.conftest import Cli

DAG_FILE = HEAD + """
with DAG("reports", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    SqlPrinter(task_id="daily", sql="sql/daily.sql")
    BashOperator(task_id="inline", bash_command="echo {% include 'shared/where.sql' %}")
    BashOperator(task_id="macro", bash_command="{% import 'macros/days.j2' as m %}echo {{ m.day(ds) }}")
    BashOperator.partial(task_id="each").expand(bash_command=["echo {% include 'parts/one.jinja' %}"])
"""


def write_dags(dags: Path) -> None:
    """sql/daily.sql, a template file, includes shared/where.sql; folders of their own, which no template file names
    and no module imports (so the DAG's code holds them only as what its templates include)."""
    for folder in ("sql", "shared", "macros", "parts"):
        (dags / folder).mkdir(parents=True)
    (dags / "reports.py").write_text(DAG_FILE)
    (dags / "sql" / "daily.sql").write_text("SELECT count(*) FROM sales {% include 'shared/where.sql' %}")
    (dags / "shared" / "where.sql").write_text("WHERE day = '{{ ds }}'")
    (dags / "macros" / "days.j2").write_text("{% macro day(d) %}day-{{ d }}{% endmacro %}")
    (dags / "parts" / "one.jinja").write_text("part-{{ ds }}")  # (a suffix the code keeps only as an include)


@pytest.fixture
def dags(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "dags"
    write_dags(folder)
    yield folder
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_the_files_a_template_includes_are_the_dags_code(dags: Path) -> None:
    loaded = load_file(str(dags / "reports.py"), str(dags))
    assert loaded.error is None, loaded.error
    assert loaded.code is not None
    kept = set(loaded.code.files())
    assert {"sql/daily.sql", "shared/where.sql", "macros/days.j2", "parts/one.jinja"} <= kept
    before = version_of(loaded.dags[0])[0]
    (dags / "shared" / "where.sql").write_text("WHERE day = '{{ ds }}' AND shop = 1")  # an included file changes
    again = load_file(str(dags / "reports.py"), str(dags))
    assert again.error is None, again.error
    assert version_of(again.dags[0])[0] != before


def test_a_try_renders_what_its_templates_include(ready_cli: Cli) -> None:
    cli = ready_cli
    write_dags(cli.dags)
    cli.ok("trigger", "reports", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    shown = cli.json("runs", "show", "1")
    assert {t["label"]: t["state"] for t in shown["task_instances"]} == {
        "daily": "success", "inline": "success", "macro": "success", "each[0]": "success"}
    assert "SELECT count(*) FROM sales WHERE day = '2024-03-01'" in cli.ok("tasks", "logs", "reports", "1", "daily")
    assert "WHERE day = 2024-03-01" in cli.ok("tasks", "logs", "reports", "1", "inline")
    assert "day-2024-03-01" in cli.ok("tasks", "logs", "reports", "1", "macro")
    assert "part-2024-03-01" in cli.ok("tasks", "logs", "reports", "1", "each", "--map-index", "0")
    # the included file changes (a new version); run 1 cleared on its own version renders that version's copy
    (cli.dags / "shared" / "where.sql").write_text("WHERE day = 'changed'")
    cli.ok("tasks", "clear", "reports", "1", "-t", "inline")
    cli.ok("scheduler", "--exit-when-idle")
    assert "WHERE day = 2024-03-01" in cli.ok("tasks", "logs", "reports", "1", "inline", "--try", "2")

def test_an_include_found_nowhere_fails_the_try_naming_the_folders(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("lost.py", """
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG("lost", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="t", bash_command="echo {% include 'nowhere.sql' %}")
""")
    cli.ok("trigger", "lost", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    [ti] = cli.json("runs", "show", "1")["task_instances"]
    assert ti["state"] == "failed"
    log = cli.ok("tasks", "logs", "lost", "1", "t")
    assert "template error in bash_command: the template file 'nowhere.sql' is not found (looked in " in log
