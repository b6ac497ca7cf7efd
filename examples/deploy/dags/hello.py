"""A first DAG for the compose stack (examples/deploy/compose.yaml mounts this folder as the DAGs folder)."""

import pendulum

from ledger import DAG, BashTask

with DAG("hello", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("say", "echo hello from $LEDGER_TASK_ID on {{ ds }}")
