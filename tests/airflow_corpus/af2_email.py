"""Airflow 2: EmailOperator, sent through ledger's SMTP settings."""

import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.email import EmailOperator

with DAG("af2_email", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), params={"who": "team"}):
    EmailOperator(
        task_id="mail",
        to="ops@example.com; lead@example.com",
        cc=["cc@example.com"],
        subject="Report for {{ ds }}",
        html_content="<p>Hello {{ params.who }}, the report of {{ ds }} is ready.</p>",
    )

    @task(multiple_outputs=True)
    def prepare_email(day=None):
        return {"subject": f"Summary of {day}", "body": f"<p>{day}: all good</p>"}

    email_info = prepare_email(day="{{ ds }}")
    EmailOperator(task_id="summary", to="ops@example.com", subject=email_info["subject"],
                  html_content=email_info["body"])
