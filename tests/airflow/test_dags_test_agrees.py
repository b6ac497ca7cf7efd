"""`ledger dags test` runs a DAG by the scheduler's rules: one builder makes what a try receives
(scheduler/runtime/try_item.py), so the same DAG, run by the test loop and by the scheduler, gives its tries the
same context values, passed-on values, rendered templates and inlet events, and makes the same dataset events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file
from tests.backfill.test_backfill_cli import schedule
from tests.conftest import Cli

AGREE = """\
import datetime
import pendulum
from airflow import DAG
from airflow.datasets import Dataset, DatasetAlias
from airflow.datasets.metadata import Metadata
from airflow.decorators import task
from airflow.operators.bash import BashOperator

SRC, OUT, ALIAS = Dataset("agree_src"), Dataset("agree_out"), DatasetAlias("agree_alias")
DAY = pendulum.datetime(2024, 3, 5, tz="UTC")
KEYS = ("ds", "ds_nodash", "ts", "ts_nodash", "logical_date", "data_interval_start", "data_interval_end",
        "prev_data_interval_start_success", "task_instance_key_str", "params")


def events(found):
    return [[e.dataset, e.alias, e.extra, e.partition, e.source_dag_id, e.source_task_id] for e in found]


with DAG("agree", start_date=DAY, end_date=DAY, schedule="@daily", catchup=True, params={"n": 2},
         user_defined_filters={"twice": lambda v: v * 2}):
    @task(outlets=[SRC, ALIAS])
    def emit():
        yield Metadata(SRC, {"rows": 3})
        yield Metadata("agree_other", {"rows": 1}, alias="agree_alias")
        return "emitted"

    @task(inlets=[SRC, ALIAS], outlets=[OUT])
    def produce(**context):
        context["outlet_events"][OUT].extra = {"n": context["params"]["n"]}
        return {"context": {k: str(context[k]) for k in KEYS}, "try": context["ti"].try_number,
                "src": events(context["inlet_events"][SRC]), "alias": events(context["inlet_events"][ALIAS]),
                "day": datetime.date(2024, 3, 5)}

    @task
    def check(value):
        return [value["context"]["ds"], value["day"].isoformat(), len(value["src"])]

    got = produce()
    emit() >> got
    got >> BashOperator(task_id="show", bash_command="echo {{ params.n | twice }} "
                                                     "{{ ti.xcom_pull(task_ids='produce')['src'][0][2] }} "
                                                     "{{ data_interval_end | ds }} {{ var.value.get('k', 'd') }}")
    check(got)
"""


def event_fields(event: dict[str, Any]) -> tuple[Any, ...]:
    return (event["dataset"], event["alias"], event["extra"] or {}, event["partition"], event["source_task_id"])


def test_dags_test_and_the_scheduler_give_tries_the_same_context_values_templates_and_dataset_events(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("agree.py", AGREE)
    loaded = load_file(str(cli.dags / "agree.py"), str(cli.dags))
    assert loaded.error is None, loaded.error
    test = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, Path(cli.dags))
    lines: list[str] = []
    assert local_testing.test_dag(test, lines.append) is RunState.SUCCESS, "\n".join(lines)

    schedule(cli)
    [run] = cli.json("timeline", "agree")
    assert run["state"] == "success"
    run_id = str(run["run_id"])
    scheduled = {task_id: {row["key"]: row["value"] for row in cli.json("tasks", "xcom", "agree", run_id, task_id)}
                 for task_id in ("emit", "produce", "check", "show")}
    assert scheduled == test.xcom
    produced = scheduled["produce"]["return_value"]
    # the inlets read the event `emit` made earlier in the same run, in both
    assert produced["src"] == [["agree_src", None, {"rows": 3}, None, "agree", "emit"]]
    assert produced["alias"] == [["agree_other", "agree_alias", {"rows": 1}, None, "agree", "emit"]]
    assert produced["context"]["ds"] == "2024-03-05" and produced["context"]["params"] == "{'n': 2}"
    assert scheduled["check"]["return_value"] == ["2024-03-05", "2024-03-05", 1]

    [rendered] = cli.json("tasks", "rendered", "agree", run_id, "show")
    assert rendered["rendered"] == test.rendered["show"]
    assert test.rendered["show"]["bash_command"] == "echo 4 {'rows': 3} 2024-03-06 d"

    recorded = [event_fields({**e, "source_task_id": e["written_by"]["task_id"]})
                for name in ("agree_src", "agree_other", "agree_out")
                for e in cli.json("datasets", "show", name)["events"]]
    tested = [event_fields(e) for name in ("agree_src", "agree_other", "agree_out")
              for e in test.events if e["dataset"] == name]
    assert recorded == tested == [("agree_src", None, {"rows": 3}, None, "emit"),
                                  ("agree_other", "agree_alias", {"rows": 1}, None, "emit"),
                                  ("agree_out", None, {"n": 2}, None, "produce")]
    assert "[ledger] emit made a dataset event of agree_other (alias agree_alias)" in lines


def test_a_sensor_on_another_dags_run_in_a_test_says_a_test_keeps_no_runs_instead_of_waiting(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("waits.py", """\
import pendulum
from airflow import DAG
from airflow.sensors.external_task import ExternalTaskSensor

with DAG("waits", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), schedule="@daily"):
    ExternalTaskSensor(task_id="upstream", external_dag_id="upstream_dag", external_task_id="load",
                       mode="reschedule", poke_interval=3600)
""")
    result = cli.run("dags", "test", "waits", "--logical-date", "2024-03-05")
    assert result.exit_code == 1
    assert ("no run of upstream_dag at 2024-03-05T00:00:00+00:00: `ledger dags test` keeps no runs, so a test of "
            "upstream_dag made none; test it with --record first (`ledger dags test upstream_dag --record`), or "
            "trigger it (decision 0280)") in result.stdout
