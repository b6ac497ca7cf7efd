"""Airflow 2: classic operators, trigger rules, chain helpers, edge labels, a naive start_date, SLAs and the
DAG's descriptive arguments."""

import logging
from datetime import datetime, timedelta

from airflow import DAG
from airflow.models import Variable
from airflow.models.baseoperator import chain, chain_linear, cross_downstream
from airflow.operators.bash import BashOperator
from airflow.operators.empty import EmptyOperator
from airflow.operators.python import PythonOperator
from airflow.utils.edgemodifier import Label
from airflow.utils.trigger_rule import TriggerRule

log = logging.getLogger(__name__)


def missed(dag, task_list, blocking_task_list, slas, blocking_tis):
    print(f"SLA missed in {dag.dag_id}: {task_list}")


def report(ti, ds, task_instance_key_str, **context):
    token = Variable.get("api_token")
    log.info("reporting %s with token %s", ds, token)
    logging.info("root logger line for %s", task_instance_key_str)
    logging.getLogger("corpus.quiet").debug("debug lines are not captured")
    return {"day": ds, "key": task_instance_key_str, "upstream": ti.xcom_pull(task_ids="fail_soft")}


def fail_soft():
    raise ValueError("this task fails on purpose")


with DAG(
    "af2_operators",
    "Classic operators, the Airflow 2 way",
    schedule_interval="@daily",
    start_date=datetime(2024, 3, 1),
    catchup=False,
    default_args={"owner": "data-eng", "retries": 0, "sla": timedelta(hours=2), "queue": "default"},
    sla_miss_callback=missed,
    dag_display_name="Operators (Airflow 2)",
    doc_md="""
    # Operators
    Runs every day.
    """,
    tags=["corpus", "airflow2"],
    default_view="graph",
) as dag:
    start = EmptyOperator(task_id="start")
    stamp = BashOperator(
        task_id="stamp",
        bash_command="echo 'stamp {{ ts_nodash }} {{ macros.ds_add(ds, 1) }} {{ task_instance_key_str }}'",
    )
    fail = PythonOperator(task_id="fail_soft", python_callable=fail_soft)
    after_failure = EmptyOperator(task_id="after_failure", trigger_rule=TriggerRule.ONE_FAILED)
    skipped_by_rule = EmptyOperator(task_id="skipped_by_rule")
    a, b, c, d = (EmptyOperator(task_id=name) for name in ("a", "b", "c", "d"))
    write = PythonOperator(task_id="report", python_callable=report, trigger_rule=TriggerRule.ALL_DONE)
    end = EmptyOperator(task_id="end", trigger_rule="none_failed_min_one_success")

    start >> Label("always") >> stamp
    chain(stamp, [fail, a], [after_failure, b])
    fail >> skipped_by_rule
    cross_downstream([after_failure, b], [c, d])
    chain_linear([c, d], write)
    write >> Label("then") >> end
