"""The corpus of Airflow DAG files (tests/airflow_corpus), loaded unchanged from a copy of the folder and run by
ledger's test loop (scheduler/runtime/local_testing.py, in this process: each try in a forked child, as `ledger dags
test` runs them), with assertions on which tasks ran or were skipped and on the values they passed; the
TriggerDagRun pair runs under the scheduler, through the real CLI."""

from __future__ import annotations

import re
import shutil
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
from ledger.sdk.datasets import Dataset
from tests.conftest import REPO, Cli

CORPUS = REPO / "tests" / "airflow_corpus"
pytestmark = pytest.mark.filterwarnings("ignore:DAG '.*naive:UserWarning")  # the note is checked in a structure


class Corpus:
    """The corpus copied to a DAGs folder, each file loaded once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loaded: dict[str, FileResult] = {}

    def load(self, name: str) -> FileResult:
        if name not in self.loaded:
            self.loaded[name] = load_file(str(self.folder / name), str(self.folder))
        return self.loaded[name]

    def dag(self, name: str, dag_id: str) -> DAG:
        found = self.load(name)
        assert found.error is None, found.error
        return next(d for d in found.dags if d.dag_id == dag_id)

    def run(self, name: str, dag_id: str, at: str = "2024-03-05T06:00", **conf: Any) -> Ran:
        lines: list[str] = []
        run = local_testing.TestRun.of(self.dag(name, dag_id), pendulum.parse(at), conf, self.folder)  # type: ignore[arg-type]
        state = local_testing.test_dag(run, lines.append)
        return Ran(state, lines, run.xcom)


class Ran:
    def __init__(self, state: RunState, lines: list[str], xcom: dict[str, dict[str, Any]]) -> None:
        self.state, self.log, self.xcom = state, "\n".join(lines), xcom
        self.states: dict[str, str] = {}
        for line in lines:  # "--- task try 1: success (...)" or "--- task: skipped (trigger rule ...)"
            if line.startswith("--- ") and ": " in line:
                head, outcome = line[4:].split(": ", 1)
                self.states[head.split(" try ")[0]] = outcome.split(" ")[0]

    def value(self, task_id: str, key: str = "return_value") -> Any:
        return self.xcom.get(task_id, {}).get(key)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    folder = tmp_path_factory.mktemp("airflow") / "dags"
    shutil.copytree(CORPUS, folder)
    yield Corpus(folder)
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_classic_operators_trigger_rules_chains_and_labels(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_VAR_API_TOKEN", "s3cr3t-token-value")
    ran = corpus.run("af2_operators.py", "af2_operators")
    assert ran.state is RunState.FAILED  # fail_soft failed and skipped_by_rule never ran: as in Airflow
    assert ran.states == {"start": "success", "stamp": "success", "a": "success", "fail_soft": "failed",
                          "skipped_by_rule": "upstream_failed", "after_failure": "success", "b": "success",
                          "c": "success", "d": "success", "report": "success", "end": "success"}
    assert "stamp 20240305T000000 2024-03-06 af2_operators__stamp__20240305" in ran.log
    assert ran.value("report") == {"day": "2024-03-05", "key": "af2_operators__report__20240305", "upstream": None}
    # Python logging inside the task: named and root loggers at INFO, the secret it read masked, DEBUG dropped
    assert "INFO - reporting 2024-03-05 with token ***" in ran.log
    assert "{root} INFO - root logger line for af2_operators__report__20240305" in ran.log
    assert "s3cr3t" not in ran.log and "debug lines" not in ran.log


def test_the_dag_arguments_of_airflow_are_kept_and_mapped(corpus: Corpus) -> None:
    from ledger.sdk.describe import structure_of
    from ledger.services import documents

    dag = corpus.dag("af2_operators.py", "af2_operators")
    assert dag.start_date == pendulum.datetime(2024, 3, 1, tz="UTC")  # naive: read as UTC
    structure = structure_of(dag)
    assert structure["about"] == {
        "display_name": "Operators (Airflow 2)", "description": "Classic operators, the Airflow 2 way",
        "doc_md": "# Operators\nRuns every day.", "tags": ["airflow2", "corpus"], "owner": "data-eng",
        "notes": ["start_date 2024-03-01T00:00:00 is naive: read as UTC, as Airflow does"],
        "ignored_dag_args": ["default_view"]}
    assert structure["edge_labels"] == [["report", "end", "then"], ["start", "stamp", "always"]]
    graph = {t["task_id"]: t for t in documents.graph_tasks(structure)}  # the web view's graphs and dags show
    assert graph["stamp"]["labels"] == {"start": "always"} and "labels" not in graph["a"]
    assert structure["deadline"] == 7200  # the tasks' sla (from default_args)
    assert structure["callbacks"]["deadline_missed"][0]["sla_miss_callback"]["callable"] == "<dag file>.missed"
    # `queue` routes tries (the CeleryExecutor's queues): not ignored, and the default queue is not recorded
    assert dag.schedule.summary() == "@daily" and "ignored_args" not in structure
    assert all("queue" not in t for t in structure["tasks"])


def test_taskflow_multiple_outputs_suffixes_bash_groups_and_params(corpus: Corpus) -> None:
    ran = corpus.run("af2_taskflow.py", "af2_taskflow", region="us", greeting="hello")
    assert ran.state is RunState.SUCCESS
    assert set(ran.states) == {"split", "totals.add", "totals.add__1", "doubled", "announce", "own_params",
                               "context_check", "greet"}
    assert ran.value("greet") == "hello"  # the @dag function's parameter, from the run's conf
    assert ran.value("split", "count") == 10 and ran.value("split", "region") == "us"  # multiple_outputs
    assert (ran.value("totals.add"), ran.value("totals.add__1"), ran.value("doubled")) == (11, 21, 42)
    assert ran.value("announce") == "announcing us on 2024-03-05"  # @task.bash: last line, template rendered
    # a task's params lie over the DAG's, and the run's conf over both (Airflow's dag_run_conf_overrides_params)
    assert ran.value("own_params") == "us-fast"
    assert ran.value("context_check") == ["context_check", "0", 5]
    dag = corpus.dag("af2_taskflow.py", "af2_taskflow")
    assert dag.params["region"].title == "Region" and dag.params["limit"].schema == {"maximum": 10, "minimum": 1}
    assert dag.schedule.summary() == "None" or dag.schedule.describe() == {"kind": "none"}


def test_a_base_operator_subclass_renders_its_template_file_and_latest_only_skips(corpus: Corpus) -> None:
    ran = corpus.run("af2_custom.py", "af2_custom")
    assert ran.states == {"query": "success", "latest_only": "success", "notify": "skipped"}  # as Airflow does
    assert "[ledger] branch: following nothing" in ran.log
    assert ran.value("query") == {
        "sql": "SELECT count(*) FROM orders WHERE day = '2024-03-05' AND key = 'af2_custom__query__20240305'",
        "label": "report of 2024-03-05", "weekday": 5, "run": "0"}
    assert "{airflow.task.operators." in ran.log and "QueryOperator} INFO - running report of 2024-03-05" in ran.log


def test_an_airflow_3_file_runs_with_the_sdk_and_the_standard_provider(corpus: Corpus) -> None:
    ran = corpus.run("af3_sdk.py", "af3_sdk")
    assert ran.state is RunState.SUCCESS
    assert ran.states == {"begin": "success", "loud": "success", "checks.measure": "success",
                          "checks.echo": "success"}
    assert ran.value("loud") == "HELLO" and ran.value("checks.measure") == 5 and "size 5" in ran.log
    assert ran.value("checks.echo") == "size 5"  # a BashOperator passes its last output line on
    dag = corpus.dag("af3_sdk.py", "af3_sdk")
    assert dag.edge_labels == {("begin", "loud"): "go"}
    assert (dag.tasks["checks.echo"].retries, dag.tasks["loud"].retries) == (2, 0)  # the group's default_args


def test_values_pass_between_classic_and_taskflow_tasks(corpus: Corpus) -> None:
    ran = corpus.run("af2_xcom.py", "af2_xcom")
    assert ran.state is RunState.SUCCESS
    assert ran.xcom["bash_push"] == {"manually_pushed_value": "manually_pushed_value",
                                     "return_value": "value_by_return"}
    assert "bash_pull" not in ran.xcom  # do_xcom_push=False
    assert "The xcom pushed manually is manually_pushed_value" in ran.log
    assert "The returned_value xcom is value_by_return" in ran.log
    assert ran.value("pull_value_from_bash_push") == ["value_by_return", "manually_pushed_value", "fallback"]


def test_the_tutorials_of_airflow_2_and_3_run(corpus: Corpus) -> None:
    ran = corpus.run("af2_tutorial.py", "tutorial")
    assert ran.state is RunState.SUCCESS and set(ran.states) == {"print_date", "sleep", "templated"}
    assert ran.log.splitlines().count("2024-03-05 2024-03-12") == 3
    assert ran.value("templated") == "2024-03-05 2024-03-12"
    assert corpus.dag("af2_tutorial.py", "tutorial").about()["doc_md"] == "This is a documentation placed anywhere"
    ran = corpus.run("af3_taskflow.py", "tutorial_taskflow_api")
    assert ran.state is RunState.SUCCESS and "Total order value is: 1236.70" in ran.log
    assert ran.value("load") == 1236.7


def test_the_email_operator_sends_through_ledgers_smtp_settings(
        corpus: Corpus, smtp_server: tuple[int, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    port, mails = smtp_server
    monkeypatch.setenv("LEDGER_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("LEDGER_SMTP_PORT", str(port))
    monkeypatch.setenv("LEDGER_SMTP_FROM", "ledger@test.example")
    ran = corpus.run("af2_email.py", "af2_email")
    assert ran.states == {"mail": "success", "prepare_email": "success", "summary": "success"}
    mail, summary = sorted(mails, key=lambda m: len(m.rcpt_tos), reverse=True)
    # the second takes its subject and body from another task's values (XComArg in templated fields)
    assert "Subject: Summary of 2024-03-05" in summary.content.decode()
    assert "<p>2024-03-05: all good</p>" in summary.content.decode()
    assert sorted(mail.rcpt_tos) == ["cc@example.com", "lead@example.com", "ops@example.com"]
    text = mail.content.decode()
    assert "Subject: Report for 2024-03-05" in text and "Content-Type: text/html" in text
    assert "<p>Hello team, the report of 2024-03-05 is ready.</p>" in text


def test_trigger_dag_run_records_nothing_in_a_test_run(corpus: Corpus) -> None:
    ran = corpus.run("af2_trigger.py", "af2_trigger")
    assert ran.states == {"kick": "success"}
    assert "a test run records nothing: it would trigger af2_target at 2024-03-05T12:00:00+00:00" in ran.log


def test_trigger_dag_run_and_a_template_file_under_the_scheduler_a_refused_import_and_the_web_view(
        ready_cli: Cli) -> None:
    cli = ready_cli
    for name in ("af2_trigger.py", "refused_provider.py", "af2_custom.py", "sql/report.sql", "af3_sdk.py"):
        cli.dags.joinpath(name).parent.mkdir(parents=True, exist_ok=True)
        cli.dags.joinpath(name).write_text((CORPUS / name).read_text())
    errors = cli.json("dags", "errors")
    assert [e["error"].split(": ", 1)[1] for e in errors] == [
        "airflow.providers.google is an Airflow module ledger does not provide: ledger carries Airflow's core and "
        "the providers standard, common.sql, sqlite, postgres (hooks and SQLExecuteQueryOperator), http (HttpHook, "
        "HttpOperator, HttpSensor), smtp (EmailOperator, SmtpHook), apache.spark (SparkSubmitOperator, "
        "SparkSqlOperator, @task.pyspark) and amazon's S3 basics (S3Hook, S3KeySensor, S3CreateObjectOperator, "
        "S3DeleteObjectsOperator) only; call the service from a @task (PythonOperator) "
        "with its own client library, and a connection from ledger.sdk.secrets.get_connection"]
    cli.ok("trigger", "af2_trigger", "--logical-date", "2024-03-05")
    cli.ok("scheduler", "--exit-when-idle")
    runs = {dag_id: cli.json("timeline", dag_id)[0] for dag_id in ("af2_trigger", "af2_target")}
    assert runs["af2_trigger"]["state"] == "success" and runs["af2_target"]["state"] == "success"
    target = runs["af2_target"]
    assert target["logical_date"].startswith("2024-03-05T12:00:00") and target["run_type"] == "manual"
    kicked = {x["key"]: x["value"] for x in cli.json("tasks", "xcom", "af2_trigger", runs["af2_trigger"]["run_id"],
                                                       "kick")}
    assert kicked["trigger_run_id"] == target["run_id"]
    assert [x["value"] for x in cli.json("tasks", "xcom", "af2_target", target["run_id"], "receive")] == [42]
    custom = cli.json("timeline", "af2_custom")[-1]  # the latest interval: LatestOnly lets it through
    assert custom["state"] == "success"
    [query] = cli.json("tasks", "xcom", "af2_custom", custom["run_id"], "query")
    assert query["value"]["sql"].startswith("SELECT count(*) FROM orders WHERE day = ")  # the version's copy
    created = [e for e in cli.json("events", "--dag", "af2_target") if e["kind"] == "run_created"]
    assert [e["actor"] for e in created] == [f"task:af2_trigger.kick@run {runs['af2_trigger']['run_id']} try 1"]
    # the web view's version page: the DAG's description and the edge's label (af3_sdk: never scheduled)
    from fastapi.testclient import TestClient

    from ledger.infra.config import load_settings
    from ledger.web.app import create_app

    with TestClient(create_app(load_settings({"LEDGER_HOME": str(cli.home)})), base_url="http://localhost") as client:
        [version] = [d["version"] for d in client.get("/api/v1/dags").json() if d["dag_id"] == "af3_sdk"]
        page = client.get(f"/dags/af3_sdk/versions/{version}").text
    assert "Airflow 3 imports" in page
    assert re.findall(r'<text class="edge-label"[^>]*>([^<]+)</text>', page) == ["go"]


def test_branch_and_sensor_subclasses_get_airflows_context_and_take_its_arguments(corpus: Corpus) -> None:
    dag = corpus.dag("af2_flow_operators.py", "af2_flow_operators")
    assert dag.tasks["on_day"].queue == "sensors" and dag.tasks["on_day"].owner == "data"  # type: ignore[attr-defined]
    assert dag.tasks["on_day"].ignored_args == ()  # type: ignore[attr-defined]
    assert dag.tasks["pick"].owner == "flow" and dag.tasks["ready"].ignored_args == ("executor_config",)  # type: ignore[attr-defined]
    assert dag.tasks["make_cluster"].is_setup and dag.tasks["delete_cluster"].is_teardown
    ran = corpus.run("af2_flow_operators.py", "af2_flow_operators", at="2024-03-01T00:00")
    assert ran.state is RunState.FAILED  # strict failed: the run fails by its work, whatever its teardown did
    assert ran.states == {"on_day": "success", "pick": "success", "left": "success", "right": "skipped",
                          "gate": "success", "gated": "skipped", "ready": "success", "make_cluster": "success",
                          "strict": "failed", "delete_cluster": "success"}
    assert "ds 2024-03-01, wanted 2024-03-01" in ran.log
    assert "--- strict try 1: failed (no retry: AirflowFailException: cluster-1: bad input" in ran.log


def test_dataset_and_asset_files_load_and_their_producers_run(corpus: Corpus) -> None:
    producer = corpus.dag("af2_datasets.py", "af2_dataset_producer")
    assert [o.to_json() for o in producer.tasks["write_orders"].outlets] == [
        Dataset("s3://warehouse/orders").to_json()]
    consumer = corpus.dag("af2_datasets.py", "af2_dataset_consumer")
    assert consumer.datasets is not None and consumer.tasks["read"].inlets
    either = corpus.dag("af2_datasets.py", "af2_dataset_or_time")
    assert either.datasets is not None and either.schedule.describe()["type"] == "cron_trigger"
    assert corpus.dag("af3_assets.py", "af3_asset_consumer").datasets is not None
    ran = corpus.run("af2_datasets.py", "af2_dataset_producer")
    assert ran.state is RunState.SUCCESS and ran.states == {"write_orders": "success", "write_refunds": "success"}
    ran = corpus.run("af3_assets.py", "af3_asset_producer")
    assert ran.state is RunState.SUCCESS and ran.value("publish") == 42
