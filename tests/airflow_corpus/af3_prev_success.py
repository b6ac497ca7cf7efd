"""Airflow 3: the prev_*_success context names, one run after another (max_active_runs=1) with catch-up: the first
run has no prior successful run, the second sees the first."""

import pendulum
from airflow.sdk import dag, get_current_context, task


@dag(schedule="@daily", start_date=pendulum.today("UTC").subtract(days=2), catchup=True, max_active_runs=1)
def af3_prev_success():
    @task
    def report(prev_data_interval_start_success=None, prev_data_interval_end_success=None):
        context = get_current_context()
        started, ended = context["prev_start_date_success"], context["prev_end_date_success"]
        return {"interval": [str(prev_data_interval_start_success), str(prev_data_interval_end_success)],
                "started": started.isoformat() if started else None, "ended": ended.isoformat() if ended else None}

    report()


af3_prev_success()
