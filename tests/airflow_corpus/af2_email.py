"""Airflow 2: EmailOperator, sent through ledger's SMTP settings."""

import pendulum
from airflow import DAG
from airflow.operators.email import EmailOperator

with DAG("af2_email", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), params={"who": "team"}):
    EmailOperator(
        task_id="mail",
        to="ops@example.com; lead@example.com",
        cc=["cc@example.com"],
        subject="Report for {{ ds }}",
        html_content="<p>Hello {{ params.who }}, the report of {{ ds }} is ready.</p>",
    )
