"""Airflow 2's tutorial, as its documentation writes it: default_args, docs set after the fact, a Jinja loop."""

import textwrap
from datetime import datetime, timedelta

from airflow.models.dag import DAG
from airflow.operators.bash import BashOperator

with DAG(
    "tutorial",
    default_args={
        "depends_on_past": False,
        "email": ["airflow@example.com"],
        "email_on_failure": False,
        "email_on_retry": False,
        "retries": 1,
        "retry_delay": timedelta(minutes=5),
    },
    description="A simple tutorial DAG",
    schedule=timedelta(days=1),
    start_date=datetime(2021, 1, 1),
    catchup=False,
    tags=["example"],
) as dag:
    t1 = BashOperator(task_id="print_date", bash_command="date +%Y")
    t2 = BashOperator(task_id="sleep", depends_on_past=False, bash_command="sleep 0", retries=3)
    t1.doc_md = textwrap.dedent(
        """\
    #### Task Documentation
    You can document your task using the attributes `doc_md` (markdown).
    """
    )
    dag.doc_md = """This is a documentation placed anywhere"""
    templated_command = textwrap.dedent(
        """
    {% for i in range(3) %}
        echo "{{ ds }} {{ macros.ds_add(ds, 7) }}"
    {% endfor %}
    """
    )
    t3 = BashOperator(task_id="templated", depends_on_past=False, bash_command=templated_command)
    t1 >> [t2, t3]
