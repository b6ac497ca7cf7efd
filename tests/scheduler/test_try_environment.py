"""Every try's process has the LEDGER_* environment docs/concepts.md promises, whatever the task's kind: a
Python callable reads os.environ, a Bash command $LEDGER_RUN_ID, a Spark task os.environ too; a worker that
runs tries itself gets its own environment back after each."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.scheduler.runtime import in_process, spark_session, try_plan
from ledger.sdk.context import TRY_ENV_KEYS, TaskContext, environment, set_environment
from tests.scheduler.test_task_runner import outcome_of, read_log, work_item

SOURCE = '''
import os

import pendulum

from ledger import DAG, BashTask, PythonTask
from ledger.sdk.spark import SparkTask

KEYS = ("LEDGER_DAG_ID", "LEDGER_TASK_ID", "LEDGER_RUN_ID", "LEDGER_TRY_NUMBER", "LEDGER_DAG_VERSION",
        "LEDGER_LOGICAL_DATE", "LEDGER_DATA_INTERVAL_START", "LEDGER_DATA_INTERVAL_END", "LEDGER_RUN_TYPE",
        "LEDGER_CODE_DIR", "LEDGER_WRITES_PATH", "LEDGER_MAP_INDEX")


def show():
    for key in KEYS:
        print(f"{key}={os.environ.get(key, '<unset>')}")


def show_spark(spark, context):
    assert spark == "fake session"
    show()


with DAG("envs", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("python", show)
    BashTask("bash", "for k in LEDGER_RUN_ID LEDGER_TRY_NUMBER LEDGER_DAG_VERSION LEDGER_CODE_DIR; do "
                     "echo $k=${!k}; done")
    SparkTask("spark", show_spark)
'''

CONTEXT = TaskContext(dag_id="d", task_id="t", run_id="7", logical_date=pendulum.datetime(2024, 3, 10, tz="UTC"),
                      data_interval_start=pendulum.datetime(2024, 3, 10, tz="UTC"),
                      data_interval_end=pendulum.datetime(2024, 3, 11, tz="UTC"), try_number=2,
                      dag_version="abc123", run_type="manual", log_path="/logs/try_2.log", code_dir="/code/v1")


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    try_plan.clear_cache()
    path = tmp_path / "envs.py"
    path.write_text(SOURCE)
    return path


def _item(dag_file: Path, task_id: str) -> Any:
    item = work_item(dag_file, task_id, try_number=2, dag_id="envs")
    return dataclasses.replace(item, code_root=str(dag_file.parent))  # as if run from a version's snapshot


def _promised(item: Any) -> set[str]:
    return {"LEDGER_DAG_ID=envs", f"LEDGER_TASK_ID={item.task_id}", "LEDGER_RUN_ID=7", "LEDGER_TRY_NUMBER=2",
            "LEDGER_DAG_VERSION=v1abc", "LEDGER_LOGICAL_DATE=2024-03-10T00:00:00+00:00",
            "LEDGER_DATA_INTERVAL_START=2024-03-10T00:00:00+00:00",
            "LEDGER_DATA_INTERVAL_END=2024-03-11T00:00:00+00:00", "LEDGER_RUN_TYPE=scheduled",
            f"LEDGER_CODE_DIR={item.code_root}", f"LEDGER_WRITES_PATH={item.log_path}.writes.jsonl",
            "LEDGER_MAP_INDEX=<unset>"}


def test_the_environment_holds_the_tries_variables_and_is_put_back_after() -> None:
    environ = {"LEDGER_HOME": "/home", "LEDGER_RUN_ID": "old", "LEDGER_MAP_INDEX": "4", "PATH": "/bin"}
    with environment(CONTEXT, environ):
        assert environ["LEDGER_RUN_ID"] == "7" and environ["LEDGER_TRY_NUMBER"] == "2"
        assert environ["LEDGER_DAG_VERSION"] == "abc123" and environ["LEDGER_CODE_DIR"] == "/code/v1"
        assert environ["LEDGER_WRITES_PATH"] == "/logs/try_2.log.writes.jsonl"
        assert "LEDGER_MAP_INDEX" not in environ  # not a mapped try: not inherited from the worker either
        assert environ["LEDGER_HOME"] == "/home" and environ["PATH"] == "/bin"
        assert {k for k in environ if k in TRY_ENV_KEYS} == set(CONTEXT.env())
    assert environ == {"LEDGER_HOME": "/home", "LEDGER_RUN_ID": "old", "LEDGER_MAP_INDEX": "4", "PATH": "/bin"}


def test_a_forked_tries_environment_is_set_for_good_without_keeping_what_it_replaced() -> None:
    environ = {"LEDGER_HOME": "/home", "LEDGER_RUN_ID": "old", "LEDGER_MAP_INDEX": "4", "PATH": "/bin"}
    set_environment(CONTEXT, environ)
    assert {k: v for k, v in environ.items() if k in TRY_ENV_KEYS} == CONTEXT.env()  # the worker's map index gone
    assert environ["LEDGER_HOME"] == "/home" and environ["PATH"] == "/bin"


def test_without_a_context_the_environment_is_left_alone() -> None:
    environ = {"LEDGER_RUN_ID": "old"}
    with environment(None, environ):
        assert environ == {"LEDGER_RUN_ID": "old"}


def test_every_variable_a_try_may_get_is_listed() -> None:
    mapped = TaskContext(**{**CONTEXT.__dict__, "map_index": 3,
                            "signal": {"key": "k", "value": "v", "version": 1}})
    assert set(mapped.env()) == set(TRY_ENV_KEYS)


def test_a_forked_python_try_reads_its_ledger_variables_from_os_environ(dag_file: Path) -> None:
    item = _item(dag_file, "python")
    assert outcome_of(item) == ("success", None)
    assert _promised(item) <= set(read_log(item).splitlines())


def test_a_forked_bash_try_sees_the_same_variables(dag_file: Path) -> None:
    item = _item(dag_file, "bash")
    assert outcome_of(item) == ("success", None)
    lines = set(read_log(item).splitlines())
    assert {"LEDGER_RUN_ID=7", "LEDGER_TRY_NUMBER=2", "LEDGER_DAG_VERSION=v1abc",
            f"LEDGER_CODE_DIR={item.code_root}"} <= lines


def test_a_python_try_run_by_its_worker_sees_them_and_the_worker_gets_its_environment_back(
        dag_file: Path) -> None:
    before = dict(os.environ)
    item = _item(dag_file, "python")
    result = in_process.run_in_process(item)  # as a reused worker (LEDGER_REUSE_WORKERS) runs it
    assert result.outcome.state == "success", read_log(item)
    assert _promised(item) <= set(read_log(item).splitlines())
    assert dict(os.environ) == before


def test_a_spark_try_sees_them_in_its_workers_process(dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def fake_session(conf: Any = None, *, say: Any = None) -> Iterator[str]:
        yield "fake session"  # no JVM: only the environment the task sees is tested here

    monkeypatch.setattr(spark_session, "session", fake_session)
    before = dict(os.environ)
    item = _item(dag_file, "spark")
    result = in_process.run_in_process(item)
    assert result.outcome.state == "success", read_log(item)
    assert _promised(item) <= set(read_log(item).splitlines())
    assert dict(os.environ) == before


def test_a_try_has_airflows_context_variables_beside_ledgers() -> None:
    """Scripts a DAG from Airflow calls read AIRFLOW_CTX_*; they name the same facts as LEDGER_*."""
    env = CONTEXT.env()
    assert {k: env[k] for k in env if k.startswith("AIRFLOW_CTX_")} == {
        "AIRFLOW_CTX_DAG_ID": env["LEDGER_DAG_ID"], "AIRFLOW_CTX_TASK_ID": env["LEDGER_TASK_ID"],
        "AIRFLOW_CTX_DAG_RUN_ID": env["LEDGER_RUN_ID"], "AIRFLOW_CTX_TRY_NUMBER": env["LEDGER_TRY_NUMBER"],
        "AIRFLOW_CTX_EXECUTION_DATE": env["LEDGER_LOGICAL_DATE"],
        "AIRFLOW_CTX_LOGICAL_DATE": env["LEDGER_LOGICAL_DATE"]}
    assert env["AIRFLOW_CTX_EXECUTION_DATE"] == "2024-03-10T00:00:00+00:00"
