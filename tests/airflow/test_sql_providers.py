"""The SQL providers in ledger's namespace (ledger/airflow_compat/sql.py): SQLExecuteQueryOperator, DbApiHook,
SqliteHook, PostgresHook and the deprecated operators, against a real SQLite file and the suite's real PostgreSQL
server, with connections from AIRFLOW_CONN_* variables and ledger's LEDGER_CONN_*. Run in process by `ledger dags
test`'s loop (scheduler/runtime/local_testing.py), each try in a forked child as under the scheduler."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

SQLITE_DAG = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.sqlite.hooks.sqlite import SqliteHook
from airflow.providers.sqlite.operators.sqlite import SqliteOperator

with DAG("sqlite_sql", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    create = SQLExecuteQueryOperator(task_id="create", conn_id="warehouse", sql="sql/create.sql",
                                     split_statements=True)
    query = SQLExecuteQueryOperator(task_id="query", conn_id="warehouse",
                                    sql="select day, amount from sales where day <= ? order by day",
                                    parameters=["{{ ds }}"])

    @task
    def total(rows):
        hook = SqliteHook(sqlite_conn_id="warehouse")
        hook.insert_rows("sales", [("2024-03-06", 5)], target_fields=["day", "amount"])
        return [sum(amount for _day, amount in rows), hook.get_first("select count(*) from sales")[0],
                hook.get_records("select max(amount) from sales")]

    create >> query
    total(query.output) >> SqliteOperator(task_id="cleanup", sqlite_conn_id="warehouse",
                                          sql="delete from sales where amount < 2")
"""

POSTGRES_DAG = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.providers.postgres.operators.postgres import PostgresOperator

with DAG("postgres_sql", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    load = PostgresOperator(task_id="load", postgres_conn_id="pg",
                            sql=["create table t (n int, price numeric(5, 2))",
                                 "insert into t values (1, 1.50), (2, 2.25)", "select n, price from t order by n"])

    @task
    def read(rows):
        return [rows, PostgresHook(postgres_conn_id="pg").get_records("select sum(price) from t")]

    read(load.output)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "dags"
    (root / "sql").mkdir(parents=True)
    (root / "sql" / "create.sql").write_text(
        "create table sales (day text, amount int);\n"
        "insert into sales values ('2024-03-04', 1), ('2024-03-05', 2), ('2024-03-07', 4);\n")
    yield root
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def run(folder: Path, name: str, text: str) -> tuple[RunState, str, dict[str, dict[str, Any]]]:
    (folder / name).write_text(text)
    loaded = load_file(str(folder / name), str(folder))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    test = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(test, lines.append)
    return state, "\n".join(lines), test.xcom


def test_sql_operators_and_the_sqlite_hook_run_on_a_sqlite_file_named_by_an_airflow_conn_variable(
        folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "warehouse.db"
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", f"sqlite:///{db}")
    state, log, xcom = run(folder, "sqlite_sql.py", SQLITE_DAG)
    assert state is RunState.SUCCESS, log
    assert xcom["query"]["return_value"] == [["2024-03-04", 1], ["2024-03-05", 2]]  # rendered {{ ds }}, a file
    assert xcom["total"]["return_value"] == [3, 4, [[5]]]
    with sqlite3.connect(db) as conn:
        assert conn.execute("select day, amount from sales order by day").fetchall() == [
            ("2024-03-05", 2), ("2024-03-06", 5), ("2024-03-07", 4)]


def test_a_connection_of_a_type_without_a_sql_hook_fails_the_try_naming_the_carried_ones(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_CONN_WAREHOUSE", "mysql://u:p@127.0.0.1:1/db")
    state, log, _xcom = run(folder, "sqlite_sql.py", SQLITE_DAG)
    assert state is RunState.FAILED
    assert ("--- create try 1: failed (AirflowException: connection 'warehouse' is of type 'mysql', for which "
            "ledger carries no SQL hook; it carries: postgres, sqlite)") in log


def test_the_postgres_hook_and_operator_run_on_a_real_postgresql_server(
        folder: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_CONN_PG", "postgres://" + postgres_url.split("://", 1)[1])
    state, log, xcom = run(folder, "postgres_sql.py", POSTGRES_DAG)
    assert state is RunState.SUCCESS, log
    # a list of statements gives a result per statement, as Airflow's; a numeric passes as a Decimal (stored tagged)
    assert xcom["load"]["return_value"] == [None, None,
                                            [[1, {"__ledger_xcom_type__": "decimal", "value": "1.50"}],
                                             [2, {"__ledger_xcom_type__": "decimal", "value": "2.25"}]]]
    assert xcom["read"]["return_value"][1] == [[{"__ledger_xcom_type__": "decimal", "value": "3.75"}]]
