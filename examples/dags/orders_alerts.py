"""Day-2 operations (docs/operations.md): a DAG that alerts by e-mail and webhook, pages through a function,
and has a run timeout and a deadline. The guide's outputs come from a real run of this file."""

from datetime import timedelta

import pendulum

from ledger import DAG, BashTask, WebhookNotifier


def page_oncall(context):
    what = context["dag_id"] + (f".{context['task_id']} try {context['try_number']}" if context["task_id"] else "")
    print(f"paging on-call: {context['kind']} of {what}: {context['reason'] or context['state']}")


with DAG("orders", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         default_args={"retries": 1, "retry_delay": timedelta(seconds=0), "email": ["oncall@example.com"],
                       "email_on_retry": False},
         dagrun_timeout=timedelta(hours=2), deadline=timedelta(hours=6),
         on_failure_callback=WebhookNotifier("http://127.0.0.1:9/hooks/ledger"),
         on_deadline_missed=page_oncall) as dag:
    extract = BashTask("extract", "echo extracting {{ ds }}")
    load = BashTask("load", "echo loading; exit 1", on_failure_callback=page_oncall)
    extract >> load
