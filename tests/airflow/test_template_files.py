"""Template files of Airflow operators (ledger/airflow_compat/operators.py template_file): a templated field that
names a `.sql` or `.sh` file is that file's text, looked for in the DAG file's folder and in its DAG's
template_searchpath, however the operator joined its DAG (`with DAG` or `dag=dag`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.runtime.dagbag import load_file

HEAD = """\
import pendulum
from airflow import DAG
from airflow.models.baseoperator import BaseOperator
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator

class SqlPrinter(BaseOperator):
    template_fields = ("sql",)
    template_ext = (".sql",)

    def __init__(self, sql, **kwargs):
        super().__init__(**kwargs)
        self.sql = sql

    def execute(self, context):
        print(self.sql)

def show(templates_dict=None):
    return templates_dict
"""

ATTACHED = HEAD + """
dag = DAG("attached", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
          template_searchpath=[SEARCH])
SqlPrinter(task_id="sqlp", sql="q.sql", dag=dag)
BashOperator(task_id="script", bash_command="cat_q.sh", dag=dag)
PythonOperator(task_id="py", python_callable=show, templates_dict={"q": "q.sql"}, templates_exts=[".sql"],
               dag=dag)
"""

MISSING = HEAD + """
dag = DAG("missing", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
          template_searchpath=[SEARCH])
SqlPrinter(task_id="sqlp", sql="nowhere.sql", dag=dag)
"""


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the DAGs folder, a template_searchpath folder outside it holding q.sql and cat_q.sh)."""
    dags, search = tmp_path / "dags", tmp_path / "sql"
    dags.mkdir()
    search.mkdir()
    (search / "q.sql").write_text("SELECT * FROM t WHERE d = '{{ ds }}'")
    (search / "cat_q.sh").write_text("echo {{ ds }}")
    yield dags, search
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def write(dags: Path, search: Path, name: str, text: str) -> str:
    path = dags / name
    path.write_text(f"SEARCH = {str(search)!r}\n" + text)
    return str(path)


def test_an_operator_attached_with_dag_reads_its_template_file_from_the_dags_searchpath(
        folders: tuple[Path, Path]) -> None:
    dags, search = folders
    loaded = load_file(write(dags, search, "attached.py", ATTACHED), str(dags))
    assert loaded.error is None, loaded.error
    [dag] = loaded.dags
    query = "SELECT * FROM t WHERE d = '{{ ds }}'"
    assert dag.tasks["sqlp"].sql == query
    assert dag.tasks["script"].bash_command == "echo {{ ds }}"
    assert dag.tasks["py"].templates_dict == {"q": query}


def test_a_template_file_not_found_names_every_folder_looked_in(folders: tuple[Path, Path]) -> None:
    dags, search = folders
    loaded = load_file(write(dags, search, "missing.py", MISSING), str(dags))
    assert loaded.error is not None
    assert (f"task 'sqlp': cannot read the template file 'nowhere.sql' of sql: No such file or directory "
            f"(looked in {dags}, {search})") in loaded.error
