"""Documented Airflow features a DAG file uses, each as Airflow does it (issue 42's defects): run in process by
`ledger dags test`'s loop (scheduler/runtime/local_testing.py), which runs each try as the scheduler's executor
does."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.dag import DAG, describe_callbacks

HEAD = """\
import pendulum
from airflow import DAG
from airflow.decorators import dag, task
from airflow.datasets import Dataset, DatasetAlias
from airflow.models.baseoperator import BaseOperator
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator
START = pendulum.datetime(2024, 1, 1, tz="UTC")
"""

FILES = {
    "inlets.py": HEAD + """
SRC = Dataset("s3://bucket/src")

@dag(start_date=START, schedule=None)
def taskflow_inlets():
    @task(inlets=[SRC, DatasetAlias("in-alias")])
    def read(*, inlet_events=None):
        return [len(inlet_events[SRC]), len(inlet_events.for_asset(uri="s3://bucket/src")),
                len(inlet_events.for_asset_alias(name="in-alias"))]

    @task(outlets=[DatasetAlias("my-alias"), Dataset("s3://bucket/out")])
    def emit(*, outlet_events=None):
        outlet_events["my-alias"].add(Dataset("s3://bucket/x"), extra={"k": 1})
        outlet_events.for_asset(uri="s3://bucket/out").extra = {"rows": 2}
        outlet_events.for_asset_alias(name="my-alias").add(Dataset("s3://bucket/y"))
        return "emitted"

    read() >> emit()

taskflow_inlets()
""",
    "templates_dict.py": HEAD + """
def show(templates_dict=None, **_):
    return templates_dict

with DAG("templates_dict", start_date=START, schedule=None):
    PythonOperator(task_id="from_file", python_callable=show, templates_dict={"q": "sql/q.sql", "n": "{{ ds }}"},
                   templates_exts=[".sql"])
    PythonOperator(task_id="plain", python_callable=show, templates_dict={"a": "no template"})
""",
    "sql/q.sql": "select '{{ ds }}'\n",
    "xcom_field.py": HEAD + """
@dag(start_date=START, schedule=None)
def xcom_field():
    @task(multiple_outputs=True)
    def prep():
        return {"command": "echo from-prep"}
    BashOperator(task_id="run", bash_command=prep()["command"])

xcom_field()
""",
    "render_template.py": HEAD + """
class Op(BaseOperator):
    def execute(self, context):
        return self.render_template("{{ ds }} {{ 'x' | shout }}", context)

def call(**context):
    return context["task"].render_template(["{{ ds_nodash }}"], context)

with DAG("render_template", start_date=START, schedule=None, user_defined_filters={"shout": str.upper}):
    Op(task_id="op") >> PythonOperator(task_id="py", python_callable=call)
""",
    "var_get.py": HEAD + """
with DAG("var_get", start_date=START, schedule=None):
    BashOperator(task_id="b", bash_command="echo {{ var.value.get('not_set_anywhere', 'fallback') }} "
                                           "{{ var.json.get('not_set_either', {'a': 1})['a'] }}")
""",
    "script.py": HEAD + """
with DAG("script", start_date=START, schedule=None):
    BashOperator(task_id="file", bash_command="scripts/run.sh")
    BashOperator(task_id="as_is", bash_command="bash scripts/run.sh ")
""",
    "scripts/run.sh": 'echo "script for {{ ds }}"\n',
    "native.py": HEAD + """
import os

def kinds(n, xs):
    return [type(n).__name__, n, xs]

with DAG("native", start_date=START, schedule=None, params={"n": 2}, render_template_as_native_obj=True,
         template_searchpath=[os.path.join(os.path.dirname(__file__), "shared")]):
    PythonOperator(task_id="values", python_callable=kinds, op_kwargs={"n": "{{ params.n + 1 }}", "xs": "{{ [1, 2] }}"})
    BashOperator(task_id="shared_script", bash_command="shared.sh")
""",
    "shared/shared.sh": "echo shared {{ ds }}\n",
    "jinja.py": HEAD + """
import jinja2

with DAG("jinja", start_date=START, schedule=None, template_undefined=jinja2.Undefined,
         jinja_environment_kwargs={"trim_blocks": True}):
    BashOperator(task_id="b", bash_command="{% if true %}\\necho [{{ not_defined }}]{% endif %}")
""",
    "filters.py": HEAD + """
with DAG("filters", start_date=START, schedule=None,
         user_defined_filters={"first": lambda s: "MINE-" + s[0], "shout": lambda s: s.upper()},
         user_defined_macros={"greeting": "hello"}):
    BashOperator(task_id="b", bash_command="echo {{ 'abc' | first }} {{ 'x' | shout }} {{ greeting }}")
""",
    "delays.py": HEAD + """
with DAG("delays", start_date=START, schedule=None, default_args={"retry_delay": 30, "max_retry_delay": 600}):
    BashOperator(task_id="own", bash_command="echo hi", retry_delay=60.5)
    BashOperator(task_id="default", bash_command="echo hi")
""",
    "callbacks.py": HEAD + """
SEEN = []

def alert(context):
    SEEN.append((context["ti"].task_id, context["task_instance"].try_number, str(context["exception"]),
                 context["ds"], context["task"].task_id, context["dag"].dag_id, context["reason"]))

def done(context):
    SEEN.append((context["ti"].task_id, context["exception"], context["dag_run"].run_type))

with DAG("callbacks", start_date=START, schedule=None, on_success_callback=done):
    BashOperator(task_id="b", bash_command="exit 3", on_failure_callback=alert)
""",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("defects") / "dags"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    yield root
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def load(folder: Path, name: str) -> DAG:
    loaded = load_file(str(folder / name), str(folder))
    assert loaded.error is None, loaded.error
    [dag] = loaded.dags
    return dag


def run(folder: Path, name: str) -> tuple[RunState, str, dict[str, dict[str, Any]]]:
    lines: list[str] = []
    test = local_testing.TestRun.of(load(folder, name), pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(test, lines.append)
    return state, "\n".join(lines), test.xcom


def test_dags_test_gives_a_taskflow_task_its_inlets_and_an_alias_named_by_a_string_takes_events(
        folder: Path) -> None:
    state, log, xcom = run(folder, "inlets.py")
    assert state is RunState.SUCCESS, log
    assert xcom["read"]["return_value"] == [0, 0, 0]  # every inlet is given; nothing wrote them before `read`
    assert xcom["emit"]["return_value"] == "emitted"


def test_templates_dict_values_named_by_templates_exts_are_template_files_and_plain_ones_are_given(
        folder: Path) -> None:
    state, log, xcom = run(folder, "templates_dict.py")
    assert state is RunState.SUCCESS, log
    assert xcom["from_file"]["return_value"] == {"q": "select '2024-03-05'\n", "n": "2024-03-05"}
    assert xcom["plain"]["return_value"] == {"a": "no template"}


def test_another_tasks_value_in_an_operators_templated_field_is_resolved_when_the_try_runs(folder: Path) -> None:
    dag = load(folder, "xcom_field.py")
    assert dag.tasks["run"].upstream_ids == {"prep"}
    state, log, _xcom = run(folder, "xcom_field.py")
    assert state is RunState.SUCCESS, log
    assert "running: bash -c 'echo from-prep'" in log


def test_render_template_is_on_every_operator_with_the_dags_filters(folder: Path) -> None:
    state, log, xcom = run(folder, "render_template.py")
    assert state is RunState.SUCCESS, log
    assert xcom["op"]["return_value"] == "2024-03-05 X"
    assert xcom["py"]["return_value"] == ["20240305"]


def test_var_value_get_gives_its_default_for_a_variable_not_set(folder: Path) -> None:
    state, log, _xcom = run(folder, "var_get.py")
    assert state is RunState.SUCCESS, log
    assert "running: bash -c 'echo fallback 1'" in log


def test_a_bash_command_naming_a_script_renders_the_file_and_a_trailing_space_runs_it_as_it_is(
        folder: Path) -> None:
    dag = load(folder, "script.py")
    assert dag.tasks["file"].bash_command == 'echo "script for {{ ds }}"\n'  # type: ignore[attr-defined]
    assert dag.tasks["as_is"].bash_command == "bash scripts/run.sh "  # type: ignore[attr-defined]


def test_user_defined_filters_and_macros_are_applied_over_jinjas_own(folder: Path) -> None:
    state, log, _xcom = run(folder, "filters.py")
    assert state is RunState.SUCCESS, log
    assert "running: bash -c 'echo MINE-a X hello'" in log  # the DAG's `first`, not Jinja's


def test_a_number_given_as_retry_delay_is_seconds(folder: Path) -> None:
    dag = load(folder, "delays.py")
    assert dag.tasks["own"].retry_delay == timedelta(seconds=60.5)
    assert dag.tasks["default"].retry_delay == timedelta(seconds=30)
    assert dag.tasks["default"].max_retry_delay == timedelta(seconds=600)


def test_schedule_and_schedule_interval_together_are_refused_in_one_line(folder: Path) -> None:
    fileloc = folder / "both.py"
    fileloc.write_text(HEAD + 'with DAG("both", start_date=START, schedule="@daily", schedule_interval="@daily"):\n'
                              '    BashOperator(task_id="b", bash_command="echo hi")\n')
    try:
        loaded = load_file(str(fileloc), str(folder))
    finally:
        fileloc.unlink()
    assert loaded.error is not None and "\n" not in loaded.error.strip()
    assert loaded.error.strip().endswith("DAG 'both': give at most one of schedule_interval, timetable and "
                                         "schedule, not schedule_interval and schedule")


def test_a_callback_gets_airflows_context_with_ti_and_the_exception_and_is_recorded_as_written(
        folder: Path) -> None:
    dag = load(folder, "callbacks.py")
    module = sys.modules[dag.tasks["b"].callbacks["task_failure"][0].__module__]
    assert describe_callbacks(dag.tasks["b"].callbacks) == describe_callbacks({"task_failure": [module.alert]})
    run_context = {"kind": "task_failure", "dag_id": "callbacks", "run_id": 7, "run_type": "manual",
                   "dag_version": "abc", "logical_date": "2024-03-05T00:00:00+00:00",
                   "data_interval_start": "2024-03-05T00:00:00+00:00",
                   "data_interval_end": "2024-03-05T00:00:00+00:00", "conf": {}, "task_id": "b", "try_number": 1,
                   "state": "failed", "reason": "exit code 3", "log_path": None}  # as the scheduler records it
    dag.tasks["b"].callbacks["task_failure"][0](run_context)
    dag.callbacks["run_success"][0]({**run_context, "kind": "run_success", "task_id": None, "try_number": None,
                                     "state": "success", "reason": None})
    assert module.SEEN == [("b", 1, "exit code 3", "2024-03-05", "b", "callbacks", "exit code 3"),
                           (None, None, "manual")]


def test_an_outlet_events_extra_changed_in_place_is_kept(tmp_path: Path) -> None:
    """`outlet_events[ds].extra["k"] = v` and `.extra.update(...)` are kept as `.extra = {...}` is (the lines the
    scheduler reads with the try's outcome: scheduler/loop/dataset_runs.py merges them per outlet)."""
    from ledger.sdk.context import OutletEvents

    path = tmp_path / "try.writes.jsonl"
    events = OutletEvents(str(path))
    events["s3://b/x"].extra["rows"] = 5
    events["s3://b/x"].extra.update(cols=2)
    events["s3://b/y"].extra = {"a": 1}
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"outlet": "s3://b/x", "extra": {"rows": 5}}, {"outlet": "s3://b/x", "extra": {"cols": 2}},
                     {"outlet": "s3://b/y", "extra": {"a": 1}}]


ALERT = """\
import json
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

def alert(context):
    with open(OUT, "w") as f:
        json.dump([context["ti"].task_id, context["task_instance"].try_number, str(context["exception"]),
                   context["ds"], context["dag"].dag_id, context["params"]["who"]], f)

with DAG("alerting", start_date=pendulum.datetime(2024, 3, 5, tz="UTC"), schedule=None, params={"who": "ops"},
         default_args={"on_failure_callback": alert}):
    BashOperator(task_id="fails", bash_command="exit 3")
"""


def test_an_airflow_alert_callback_gets_ti_and_the_exception_under_the_scheduler(ready_cli: Any,
                                                                                tmp_path: Path) -> None:
    from tests.backfill.test_backfill_cli import schedule

    cli = ready_cli
    out = tmp_path / "alert.json"
    cli.write_dag("alerting.py", f"OUT = {str(out)!r}\n" + ALERT)
    cli.ok("trigger", "alerting", "--logical-date", "2024-03-05")
    schedule(cli)
    [call] = cli.json("callbacks", "--dag", "alerting")
    assert call["state"] == "ok", call
    assert json.loads(out.read_text()) == ["fails", 1, "exit code 3", "2024-03-05", "alerting", "ops"]


def test_render_template_as_native_obj_gives_python_values_and_template_searchpath_finds_files(folder: Path) -> None:
    state, log, xcom = run(folder, "native.py")
    assert state is RunState.SUCCESS, log
    assert xcom["values"]["return_value"] == ["int", 3, [1, 2]]
    assert "running: bash -c 'echo shared 2024-03-05" in log


def test_jinja_environment_kwargs_and_template_undefined_are_the_environment_templates_render_in(
        folder: Path) -> None:
    state, log, _xcom = run(folder, "jinja.py")
    assert state is RunState.SUCCESS, log
    assert "running: bash -c 'echo []'" in log  # trim_blocks ate the newline; the undefined name is empty
