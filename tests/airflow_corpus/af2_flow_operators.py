"""Airflow 2.x style: subclasses of BaseSensorOperator and BaseBranchOperator that read Airflow's context,
Airflow's operator arguments on the branch and sensor operators, @setup and @teardown over @task functions, and
AirflowFailException (no retry)."""

import pendulum
from airflow import DAG
from airflow.decorators import setup, task, teardown
from airflow.exceptions import AirflowFailException
from airflow.operators.bash import BashOperator
from airflow.operators.branch import BaseBranchOperator
from airflow.operators.python import ShortCircuitOperator
from airflow.sensors.base import BaseSensorOperator
from airflow.sensors.python import PythonSensor


class DateSensor(BaseSensorOperator):
    """Done once the run's `ds` is the wanted day (a templated field)."""

    template_fields = ("wanted",)

    def __init__(self, *, wanted, **kwargs):
        super().__init__(**kwargs)
        self.wanted = wanted

    def poke(self, context):
        self.log.info("ds %s, wanted %s", context["ds"], self.wanted)
        return context["ds"] == self.wanted


class PickByParam(BaseBranchOperator):
    def choose_branch(self, context):
        return context["params"]["side"]


with DAG(
    dag_id="af2_flow_operators",
    start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
    schedule="@once",
    params={"side": "left"},
    default_args={"owner": "data"},
):
    on_day = DateSensor(task_id="on_day", wanted="{{ ds }}", poke_interval=1, timeout=30, queue="sensors",
                        doc_md="waits for its day")
    pick = PickByParam(task_id="pick", owner="flow", pool_slots=1)
    on_day >> pick >> [BashOperator(task_id="left", bash_command="echo left"),
                       BashOperator(task_id="right", bash_command="echo right")]
    gate = ShortCircuitOperator(task_id="gate", python_callable=lambda: [], owner="flow", weight_rule="absolute")
    gate >> BashOperator(task_id="gated", bash_command="echo never")
    ready = PythonSensor(task_id="ready", python_callable=lambda: True, poke_interval=1, owner="flow",
                         executor_config={})

    @setup
    @task
    def make_cluster():
        return "cluster-1"

    @task(retries=3)
    def strict(cluster):
        raise AirflowFailException(f"{cluster}: bad input, not worth a retry")

    @teardown
    def delete_cluster():
        print("deleted")

    cluster = make_cluster()
    cluster >> strict(cluster) >> delete_cluster()
