"""Airflow 2: a BaseOperator subclass with execute(context), template_fields and template_ext; LatestOnly;
WeekDay."""

import pendulum
from airflow import DAG
from airflow.models.baseoperator import BaseOperator
from airflow.operators.empty import EmptyOperator
from airflow.operators.latest_only import LatestOnlyOperator
from airflow.utils.context import Context
from airflow.utils.weekday import WeekDay


class QueryOperator(BaseOperator):
    template_fields = ("sql", "label")
    template_ext = (".sql",)

    def __init__(self, sql: str, label: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sql = sql
        self.label = label

    def execute(self, context: Context):
        self.log.info("running %s", self.label)
        return {"sql": self.sql.strip(), "label": self.label, "weekday": WeekDay.FRIDAY.value,
                "run": context["run_id"]}


with DAG("af2_custom", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    query = QueryOperator(task_id="query", sql="sql/report.sql", label="report of {{ ds }}")
    latest = LatestOnlyOperator(task_id="latest_only")
    notify = EmptyOperator(task_id="notify")
    query >> latest >> notify
