"""Airflow's environment secrets backend under the scheduler: AIRFLOW_VAR_<KEY> in the environment a try runs in
is the variable, before the stored one, in task code and in templates, as in Airflow; AIRFLOW_CONN_<ID> is the
connection of `{{ conn.ID }}` when ledger has none, as for the provider hooks."""

from __future__ import annotations

from cryptography.fernet import Fernet

from tests.conftest import Cli

ENV_DAG = """
import pendulum
from airflow import DAG
from airflow.models import Variable
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator

def read():
    print("task code:", Variable.get("from_env"))

with DAG("env_secrets", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="templated", bash_command="echo template: {{ var.value.from_env }}")
    BashOperator(task_id="conn", bash_command="echo conn: {{ conn.envdb.host }} {{ conn.envdb.password }}")
    PythonOperator(task_id="code", python_callable=read)
"""


def test_a_try_reads_airflow_var_and_airflow_conn_from_its_environment(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "from_env", "stored-value")
    cli.write_dag("env_secrets.py", ENV_DAG)
    cli.ok("trigger", "env_secrets")
    cli.ok("scheduler", "--exit-when-idle", AIRFLOW_VAR_FROM_ENV="env-value",
           AIRFLOW_CONN_ENVDB="postgres://u:pw-SECRET@envhost:5432/x")
    assert {t["state"] for t in cli.json("runs", "show", "1")["task_instances"]} == {"success"}
    assert "template: env-value" in cli.ok("tasks", "logs", "env_secrets", "1", "templated")
    assert "task code: env-value" in cli.ok("tasks", "logs", "env_secrets", "1", "code")
    conn = cli.ok("tasks", "logs", "env_secrets", "1", "conn")
    assert "conn: envhost ***" in conn and "SECRET" not in conn  # the password the try read is masked
