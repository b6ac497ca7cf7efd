"""Modules and names Airflow DAG files import (issue 42): each provided and working as Airflow's, or refused in one
line naming what to use. Run in process by `ledger dags test`'s loop (scheduler/runtime/local_testing.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import FileResult, load_file
from ledger.sdk.dag import DAG

START = 'START = pendulum.datetime(2024, 1, 1, tz="UTC")\n'

FILES = {
    "old_paths.py": """
import pendulum
from airflow import DAG, Dataset
from airflow.configuration import conf
from airflow.models import TaskInstance
from airflow.models.dataset import Dataset as ModelDataset, DatasetEvent
from airflow.operators.bash_operator import BashOperator
from airflow.operators.dummy_operator import DummyOperator
from airflow.operators.python_operator import PythonOperator
from airflow.utils.template import literal
""" + START + """
def report(ti: TaskInstance, **_):
    return [conf.get("core", "dags_folder"), conf.get("ledger_test", "not_set", fallback="fb"),
            conf.getboolean("ledger_test", "flag"), ModelDataset is Dataset, DatasetEvent.__name__]

with DAG("old_paths", start_date=START, schedule=None, outlets=None) if False else \\
        DAG("old_paths", start_date=START, schedule=None):
    DummyOperator(task_id="start") >> PythonOperator(task_id="report", python_callable=report) >> \\
        BashOperator(task_id="raw", bash_command=literal("echo '{{ ds }}'"))
""",
    "by_position.py": """
import pendulum
from airflow.decorators import dag, task
""" + START + """
@dag("given_by_position", start_date=START, schedule=None)
def ignored_name():
    @task
    def one():
        return 1
    one()

ignored_name()
""",
    "no_start.py": """
from airflow.sdk import DAG
from airflow.providers.standard.operators.bash import BashOperator

with DAG("no_start", schedule="@daily"):
    BashOperator(task_id="b", bash_command="echo 1")
""",
    "xcom_types.py": """
import datetime, decimal
import numpy
import pendulum
from airflow.decorators import dag, task
""" + START + """
@dag(start_date=START, schedule=None)
def xcom_types():
    @task
    def make():
        return {"n": numpy.int64(3), "f": numpy.float32(0.5), "d": datetime.date(2024, 3, 5),
                "t": datetime.datetime(2024, 3, 5, 6, 7, tzinfo=datetime.timezone.utc), "s": {"b", "a"},
                "m": decimal.Decimal("1.10")}

    @task
    def check(v):
        assert type(v["n"]) is int and v["n"] == 3 and v["f"] == 0.5
        assert v["d"] == datetime.date(2024, 3, 5) and v["s"] == {"a", "b"} and v["m"] == decimal.Decimal("1.10")
        assert v["t"] == datetime.datetime(2024, 3, 5, 6, 7, tzinfo=datetime.timezone.utc)
        return "checked"

    check(make())

xcom_types()
""",
    "branches.py": """
import sys
import pendulum
from airflow.decorators import dag, task
from airflow.operators.empty import EmptyOperator
""" + START + """
@dag(start_date=START, schedule=None)
def branches():
    @task.branch_external_python(python=sys.executable)
    def choose():
        return "left"

    choose() >> [EmptyOperator(task_id="left"), EmptyOperator(task_id="right")]

branches()
""",
    "mapped_operator.py": """
import pendulum
from airflow import DAG
from airflow.models.baseoperator import BaseOperator
from airflow.utils.task_group import TaskGroup
""" + START + """
class Hello(BaseOperator):
    template_fields = ("name",)

    def __init__(self, *, name, greeting="hi", **kwargs):
        super().__init__(**kwargs)
        self.name = name
        self.word = greeting

    def execute(self, context):
        return f"{self.word} {self.name} in {self.task_group.group_id if self.task_group else '-'}"

with DAG("mapped_operator", start_date=START, schedule=None):
    with TaskGroup("g"):
        Hello.partial(task_id="hello").expand(name=["a", "{{ ds }}"])
""",
    "metadata.py": """
import pendulum
from airflow.datasets import Dataset, DatasetAlias
from airflow.datasets.metadata import Metadata
from airflow.decorators import dag, task
""" + START + """
OUT = Dataset("s3://bucket/out")

@dag(start_date=START, schedule=None)
def metadata():
    @task(outlets=[OUT, DatasetAlias("out-alias")])
    def write():
        yield Metadata(OUT, {"rows": 5})
        yield Metadata("s3://bucket/other", {"rows": 1}, alias="out-alias")
        return "written"
    write()

metadata()
""",
    "compat_names.py": """
import json
import pendulum
from airflow.providers.common.compat.sdk import TriggerRule, timezone
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable, task
from airflow.sdk.exceptions import AirflowSkipException
""" + START + """
with DAG("compat_names", start_date=START, schedule=None):
    @task.bash(output_processor=json.loads)
    def numbers():
        return 'echo \\'{"n": [1, 2]}\\''

    @task
    def skip():
        raise AirflowSkipException("not today")

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def stamp():
        return [timezone.utcnow().tzinfo is not None, isinstance(SCHEDULE, AssetOrTimeSchedule)]

    words = BashOperator(task_id="words", bash_command="echo 'a b c'", output_processor=str.split)
    [numbers(), skip(), words] >> stamp()

SCHEDULE = AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 1 * * *", timezone="UTC"),
                               assets=[Asset("s3://b/k")])
""",
    "libs/__init__.py": "",
    "libs/helper.py": "def greeting():\n    return 'hello from libs'\n",
    "uses_example_helper.py": """
import pendulum
from airflow.example_dags.libs.helper import greeting
from airflow.sdk import DAG
from airflow.providers.standard.operators.python import PythonOperator
""" + START + """
with DAG("uses_example_helper", start_date=START, schedule=None):
    PythonOperator(task_id="greet", python_callable=greeting)
""",
    "missing_example_helper.py": "from airflow.example_dags.plugins.workday import AfterWorkdayTimetable\n",
    "kubernetes_conf.py": "from airflow.configuration import conf\n"
                          "conf.get('kubernetes_executor', 'worker_container_repository')\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("names") / "dags"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    yield root
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def loaded(folder: Path, name: str) -> FileResult:
    return load_file(str(folder / name), str(folder))


def load(folder: Path, name: str) -> DAG:
    found = loaded(folder, name)
    assert found.error is None, found.error
    [dag] = found.dags
    return dag


def run(folder: Path, name: str) -> tuple[RunState, str, dict[str, dict[str, Any]]]:
    lines: list[str] = []
    test = local_testing.TestRun.of(load(folder, name), pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(test, lines.append)
    return state, "\n".join(lines), test.xcom


def test_airflow_1_paths_conf_literal_and_the_model_names_load_and_work(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__LEDGER_TEST__FLAG", "True")
    monkeypatch.setenv("LEDGER_DAGS_FOLDER", str(folder))
    state, log, xcom = run(folder, "old_paths.py")
    assert state is RunState.SUCCESS, log
    assert xcom["report"]["return_value"] == [str(folder.resolve()), "fb", True, True, "InletEvent"]
    assert "running: bash -c \"echo '{{ ds }}'\"" in log  # a literal is given as it is


def test_an_airflow_option_neither_set_nor_defaulted_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.airflow_compat.config import conf
    from ledger.airflow_compat.graph import AirflowConfigException

    monkeypatch.delenv("AIRFLOW__SMTP__SMTP_HOST", raising=False)
    with pytest.raises(AirflowConfigException, match=r"^\[smtp\] smtp_host is not set: ledger has no airflow.cfg; "
                                                     "set AIRFLOW__SMTP__SMTP_HOST or give conf.get a fallback"):
        conf.get("smtp", "smtp_host")


def test_the_dag_id_may_be_given_to_dag_by_position(folder: Path) -> None:
    assert load(folder, "by_position.py").dag_id == "given_by_position"


def test_an_airflow_3_dag_scheduled_without_start_date_runs_from_its_latest_interval(folder: Path) -> None:
    dag = load(folder, "no_start.py")
    assert dag.start_date == pendulum.datetime(1970, 1, 1, tz="UTC") and dag.catchup is False
    assert dag.notes == ["no start_date: runs from the latest interval on, as Airflow 3 schedules it"]  # type: ignore[attr-defined]
    (folder / "catchup.py").write_text(FILES["no_start.py"].replace('"no_start", schedule="@daily"',
                                                                  '"catchup", schedule="@daily", catchup=True'))
    refused = loaded(folder, "catchup.py").error
    (folder / "catchup.py").unlink()
    assert refused is not None and refused.strip().endswith(
        "DAG 'catchup': catchup=True needs a start_date (the first interval to catch up from); give one, or leave "
        "catchup off to start at the latest interval")


def test_values_airflows_serializer_takes_pass_between_tasks_as_they_were(folder: Path) -> None:
    state, log, xcom = run(folder, "xcom_types.py")
    assert state is RunState.SUCCESS, log
    assert xcom["check"]["return_value"] == "checked"


def test_a_branch_in_another_interpreter_follows_its_choice(folder: Path) -> None:
    state, log, _xcom = run(folder, "branches.py")
    assert state is RunState.SUCCESS, log
    assert "--- left try 1: success" in log and "--- right: skipped" in log


def test_a_classic_operators_own_arguments_are_mapped_and_it_knows_its_task_group(folder: Path) -> None:
    state, log, xcom = run(folder, "mapped_operator.py")
    assert state is RunState.SUCCESS, log
    assert [xcom[f"g.hello[{i}]"]["return_value"] for i in range(2)] == ["hi a in g", "hi 2024-03-05 in g"]
    (folder / "lost.py").write_text(FILES["mapped_operator.py"].replace(
        'partial(task_id="hello").expand(name=["a", "{{ ds }}"])',
        'partial(task_id="hello", name="x").expand(greeting=["a", "b"])'))
    refused = loaded(folder, "lost.py").error
    (folder / "lost.py").unlink()
    assert refused is not None and refused.strip().endswith(
        "task 'hello': Hello does not keep its argument 'greeting' as the attribute 'greeting', which is how ledger "
        "gives a mapped instance its value; map over a @task that calls the code instead")


def test_metadata_yielded_by_a_task_function_become_its_outlet_events(folder: Path) -> None:
    state, log, xcom = run(folder, "metadata.py")
    assert state is RunState.SUCCESS, log
    assert xcom["write"]["return_value"] == "written"


def test_the_common_compat_and_sdk_exception_names_and_an_output_processor_work(folder: Path) -> None:
    state, log, xcom = run(folder, "compat_names.py")
    assert state is RunState.SUCCESS, log
    assert xcom["numbers"]["return_value"] == {"n": [1, 2]}  # the last line through output_processor
    assert xcom["words"]["return_value"] == ["a", "b", "c"]
    assert xcom["stamp"]["return_value"] == [True, True]
    assert "--- skip try 1: skipped" in log


def test_airflows_example_helpers_are_the_dags_folders_own_modules(folder: Path) -> None:
    """`from airflow.example_dags.libs.helper import x` in a copy of Airflow's example folder imports the DAGs
    folder's libs/helper.py (decision 0282), kept with the DAG's version; a helper the folder lacks is refused in
    one line saying where to put it."""
    found = loaded(folder, "uses_example_helper.py")
    assert found.error is None, found.error
    assert found.code is not None and "libs/helper.py" in {f.relpath for f in found.code.support}
    state, log, xcom = run(folder, "uses_example_helper.py")
    assert state is RunState.SUCCESS, log
    assert xcom["greet"]["return_value"] == "hello from libs"
    error = loaded(folder, "missing_example_helper.py").error
    assert error is not None and error.strip().splitlines()[-1].endswith(
        "airflow.example_dags.plugins is an Airflow module ledger does not provide: Airflow's example helpers are "
        "not part of ledger; copy the helper module into your DAGs folder (airflow.example_dags.libs.helper is the "
        "DAGs folder's libs/helper.py) or import it from there")


def test_a_kubernetes_executor_option_is_refused_naming_what_to_use(folder: Path) -> None:
    error = loaded(folder, "kubernetes_conf.py").error
    assert error is not None
    assert error.strip().splitlines()[-1].endswith(
        "[kubernetes_executor] worker_container_repository: ledger has no Kubernetes executor; run the container "
        "from a @task.bash (`kubectl run ...`) or a @task")


@pytest.mark.parametrize(("module", "alternative"), [
    ("airflow.utils.session", "a DAG file gets no session of ledger's database: read a run through the task's "
                              "context (ti, dag_run), or ledger's CLI and web API"),
    ("airflow.settings", "a DAG file gets no session of ledger's database"),
    ("airflow.operators.subdag", "SubDAGs are gone from Airflow 3 and ledger; use a TaskGroup"),
    ("airflow.plugins_manager", "ledger loads no Airflow plugins"),
    ("airflow.kubernetes", "ledger has no Kubernetes executor; run the container from a @task.bash"),
    ("airflow.providers.standard.triggers", "ledger has no triggerer: a deferrable sensor waits in reschedule mode"),
])
def test_what_stays_refused_by_design_is_refused_in_one_line_naming_the_alternative(
        folder: Path, module: str, alternative: str) -> None:
    name = module.replace(".", "_") + ".py"
    (folder / name).write_text(f"import {module}\n")
    error = loaded(folder, name).error
    assert error is not None
    last = error.strip().splitlines()[-1]
    assert last.startswith(f"{folder / name}:1: {module} is an Airflow module ledger does not provide: ")
    assert alternative in last
