"""Airflow 2.x style: a DAG waiting for another DAG's task at the same logical date (ExternalTaskSensor), and the
other DAG's marker that clears it (ExternalTaskMarker)."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.sensors.external_task import ExternalTaskMarker, ExternalTaskSensor

with DAG(dag_id="flow_parent_2x", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule="@once") as parent:
    produce = BashOperator(task_id="produce", bash_command="sleep 2 && echo produced")
    marker = ExternalTaskMarker(task_id="clear_child", external_dag_id="flow_child_2x",
                                external_task_id="wait_for_parent")
    produce >> marker

with DAG(dag_id="flow_child_2x", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule="@once") as child:
    wait = ExternalTaskSensor(task_id="wait_for_parent", external_dag_id="flow_parent_2x",
                              external_task_id="produce", mode="reschedule", poke_interval=1, timeout=120)
    wait >> BashOperator(task_id="consume", bash_command="echo consumed")
