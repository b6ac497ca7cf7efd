"""What a forked try's process no longer does after the fork, because its LocalExecutor worker did it before (issue 43:
each page a child writes is copied for it, so its work is paid twice): the try's code root and LEDGER_* variables are
in place, its callable's parameters and the settings' secrets are known. And what the worker never loads: the HTTP
client of remote tries, the Celery runtime, the lease and guard of remote tries."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.executors.base import TaskEvent, dumps
from ledger.scheduler.runtime import dagbag, task_runner, try_logging, try_plan, try_process, try_report
from ledger.sdk import secrets
from ledger.sdk.context import TRY_ENV_KEYS
from tests.scheduler.test_task_runner import read_log, work_item

SOURCE = '''
import os

import pendulum

from ledger import DAG, PythonTask


def show(ds):
    print(f"ds={ds} task={os.environ.get('LEDGER_TASK_ID')} run={os.environ.get('LEDGER_RUN_ID')}")


with DAG("demo", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("show", show)
'''


@pytest.fixture
def dag_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    try_plan.clear_cache()
    for key in TRY_ENV_KEYS:  # settle() sets them in this process: put back after the test
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = tmp_path / "demo.py"
    path.write_text(SOURCE)
    yield path
    try_logging.release_logging()  # (settle() installs the try's logging handler in this process)
    try_plan.clear_cache()


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("called in the try's process")


def test_a_settled_try_runs_with_its_variables_without_setting_them_after_the_fork(
        dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    item = work_item(dag_file, "show")
    plan = try_plan.prepare(item)
    try_plan.settle(plan)
    assert os.environ["LEDGER_TASK_ID"] == "show" and os.environ["LEDGER_RUN_ID"] == "7"
    monkeypatch.setattr(task_runner, "set_environment", _refuse)  # the child inherits this module as it is now
    monkeypatch.setattr(task_runner.dagbag, "activate", _refuse)
    running = try_process.fork_try(item)
    try_plan.forget_prepared()
    outcome = running.wait(timeout=30)
    assert outcome is not None and outcome.state == "success", read_log(item)
    assert "ds=2024-03-10 task=show run=7" in read_log(item)


def test_a_settled_worker_writes_only_the_variables_that_change_and_all_of_them_once_other_code_ran(
        dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = work_item(dag_file, "show")
    try_plan.settle(try_plan.prepare(first))  # (the file imported first)
    assert not try_plan.settled_again()
    mapped = dataclasses.replace(first, ti_id=2, run_id=8, map_index=3)
    try_plan.settle(try_plan.prepare(mapped))  # the next try: its own values, one variable more
    assert try_plan.settled_again()  # (only the worker's loop ran since: its fork checks the key file alone)
    assert (os.environ["LEDGER_RUN_ID"], os.environ["LEDGER_MAP_INDEX"]) == ("8", "3")
    try_plan.settle(try_plan.prepare(first))  # and one less
    assert os.environ["LEDGER_RUN_ID"] == "7" and "LEDGER_MAP_INDEX" not in os.environ
    os.environ["LEDGER_TASK_ID"] = "changed by code run in the worker"
    try_plan.unsettle()  # (as after a try run in the worker, or a DAG file imported)
    try_plan.settle(try_plan.prepare(first))
    assert os.environ["LEDGER_TASK_ID"] == "show" and not try_plan.settled_again()


def test_the_worker_installs_the_tries_logging_handler_and_sets_it_aside_while_it_imports_a_dag_file(
        dag_file: Path, tmp_path: Path) -> None:
    try_plan.settle(try_plan.prepare(work_item(dag_file, "show")))
    root = logging.getLogger()
    handler = try_logging.log_handler(try_logging.output_streams()[1])
    assert root.handlers.count(handler) == 1 and root.level == logging.INFO
    chatty = tmp_path / "chatty.py"
    chatty.write_text(SOURCE.replace("def show(", "import logging\nlogging.getLogger('x').info('info at import')\n"
                                     "print('printed at import')\n\n\ndef show("))
    plan = try_plan.prepare(work_item(chatty, "show"))
    assert "printed at import" in plan.output and "info at import" not in plan.output  # the import's logging is its own
    assert root.handlers.count(handler) == 1 and root.level == logging.INFO  # back once imported
    try_plan.settle(plan)
    assert root.handlers.count(handler) == 1


def test_activating_the_same_file_again_puts_its_root_first_again_when_sys_path_changed(dag_file: Path) -> None:
    plan = try_plan.prepare(work_item(dag_file, "show"))
    assert plan.loaded is not None and plan.loaded.root is not None
    dagbag.activate(plan.loaded)
    assert sys.path[0] == plan.loaded.root
    dagbag.activate(plan.loaded)  # (nothing changed: nothing to do)
    assert sys.path[0] == plan.loaded.root and sys.path.count(plan.loaded.root) == 1
    sys.path.insert(0, str(dag_file.parent / "elsewhere"))
    dagbag.activate(plan.loaded)
    assert sys.path[:2] == [plan.loaded.root, str(dag_file.parent / "elsewhere")]


def test_a_callables_parameters_are_read_by_the_worker_not_by_the_try(
        dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    item = work_item(dag_file, "show")
    try_plan.prepare(item)
    monkeypatch.setattr(try_plan.inspect, "signature", _refuse)  # a signature read in the child fails the try
    running = try_process.fork_try(item)
    try_plan.forget_prepared()
    outcome = running.wait(timeout=30)
    assert outcome is not None and outcome.state == "success", read_log(item)
    assert "ds=2024-03-10" in read_log(item)


def test_the_settings_secrets_as_worked_out_are_masked_without_resolving_the_settings_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    monkeypatch.setenv("LEDGER_SMTP_PASSWORD", "smtp-secret-value")
    monkeypatch.setattr(secrets, "_seen", set())
    secrets.settings_secrets()
    monkeypatch.setattr(secrets, "_key_file", _refuse)
    secrets.seen_settings(as_worked_out=True)
    assert secrets.mask("password smtp-secret-value") == "password ***"


def test_a_report_is_left_whole_beside_a_temporary_file_a_process_of_the_same_pid_left_behind(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "try_1.log.report.json"
    try_report.write_whole(str(path), b"{}", durable=False)  # its folder is made
    leftover = path.parent / f".{path.name}.{os.getpid()}"
    leftover.write_bytes(b"half")
    try_report.write_whole(str(path), b'{"state": "success"}', durable=False)
    assert json.loads(path.read_bytes()) == {"state": "success"}
    assert leftover.read_bytes() == b"half"
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, leftover.name])


def test_a_local_report_is_written_in_place_and_one_the_disk_cut_short_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "try_1.log.report.json"
    try_report.write_in_place(str(path), b'{"state": "success"}')  # its folder is made
    assert json.loads(path.read_bytes()) == {"state": "success"}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary name beside it
    pid = os.fork()
    if pid == 0:  # a child whose file size limit cuts the write short, as a full disk would
        code = 1
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (8, 8))
            try_report.write_in_place(str(path), b'{"state": "failed", "reason": "a longer report"}')
        except OSError:
            code = 0 if not path.exists() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_finished_event_with_its_report_comes_through_the_workers_pipe_whole() -> None:
    report = try_report.TryReport("success", None, 12.5, "/logs/try_1.log", None, (("k", [1, 2]),), {"f": "x"},
                                  ({"dataset": "d", "partition": "p"},), ({"outlet": "o"},), None)
    event = TaskEvent(ti_id=3, try_number=1, kind="finished", at=12.5, state="success", pid=42, report=report)
    assert pickle.loads(dumps(event)) == event
    assert try_report.ReportFile("/x").take() is None  # (no file: none left)


PROBE = """
import json, sys
from datetime import UTC, datetime
from pathlib import Path
from ledger.scheduler.executors import local
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import try_plan, try_process

dag, logs = Path(sys.argv[1]), Path(sys.argv[2])
now = datetime(2024, 3, 10, tzinfo=UTC)
item = WorkItem(ti_id=1, run_id=7, dag_id="demo", task_id="show", try_number=1, fileloc=str(dag), logical_date=now,
                data_interval_start=now, data_interval_end=now, dag_version="v1", run_type="manual",
                log_path=str(logs / "try_1.log"))
plan = try_plan.prepare(item)  # as the worker's loop does (local._serve)
try_plan.settle(plan)
outcome = try_process.fork_try(item).wait(timeout=30)
print(json.dumps({"state": outcome and outcome.state, "modules": sorted(sys.modules)}))
"""

NOT_LOADED = ("urllib.request", "http.client", "ssl", "email.message", "celery", "kombu", "redis",
              "ledger.scheduler.runtime.celery_worker", "ledger.scheduler.runtime.try_lease",
              "ledger.scheduler.runtime.try_outbox", "ledger.scheduler.executors.celery", "sqlalchemy")


def test_the_local_worker_runs_a_try_without_loading_the_http_client_or_the_remote_try_machinery(
        dag_file: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(dag_file), str(tmp_path / "logs")], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "LEDGER_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["state"] == "success"
    assert [name for name in NOT_LOADED if name in found["modules"]] == []


TEMPLATED = '''
import sys

import pendulum

from ledger import DAG, PythonTask


def show(day):
    print(f"day={day} jinja={sorted(name for name in sys.modules if name.startswith('jinja2'))}")


with DAG("demo", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("plain", show, op_kwargs={"day": "no template"})
    PythonTask("templated", show, op_kwargs={"day": "{{ ds }}"})
'''

NATIVE = '''
import sys

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator


def show(day):
    print(f"day={day} jinja={sorted(name for name in sys.modules if name.startswith('jinja2'))}")


with DAG("native", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         render_template_as_native_obj=True):
    PythonOperator(task_id="listed", python_callable=show, op_kwargs={"day": "{{ [ds] }}"})
'''

JINJA_PROBE = """
import json, sys
from datetime import UTC, datetime
from pathlib import Path
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import try_plan, try_process

folder, logs = Path(sys.argv[1]), Path(sys.argv[2])
now = datetime(2024, 3, 10, tzinfo=UTC)
seen = {}
for n, (dag_id, task) in enumerate((("demo", "plain"), ("demo", "templated"), ("native", "listed")), start=1):
    dag = folder / f"{dag_id}.py"
    item = WorkItem(ti_id=n, run_id=7, dag_id=dag_id, task_id=task, try_number=1, fileloc=str(dag), logical_date=now,
                    data_interval_start=now, data_interval_end=now, dag_version="v1", run_type="manual",
                    log_path=str(logs / f"try_{n}.log"))
    try_plan.settle(try_plan.prepare(item))
    before_fork = sorted(name for name in sys.modules if name.startswith("jinja2"))
    outcome = try_process.fork_try(item).wait(timeout=30)
    seen[task] = {"state": outcome and outcome.state, "jinja2_before_fork": before_fork}
print(json.dumps(seen))
"""


def test_a_worker_imports_jinja_only_once_a_task_it_plans_has_a_template_and_before_forking_its_try(
        tmp_path: Path) -> None:
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "demo.py").write_text(TEMPLATED)
    (tmp_path / "dags" / "native.py").write_text(NATIVE)
    done = subprocess.run([sys.executable, "-c", JINJA_PROBE, str(tmp_path / "dags"), str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "LEDGER_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert {task: found["state"] for task, found in seen.items()} == {
        "plain": "success", "templated": "success", "listed": "success"}
    assert seen["plain"]["jinja2_before_fork"] == []  # nothing to render: no jinja2 to share with each fork
    assert "jinja2" in seen["templated"]["jinja2_before_fork"]
    assert "jinja2.nativetypes" in seen["listed"]["jinja2_before_fork"]
    logs = [(tmp_path / "logs" / f"try_{n}.log").read_text() for n in (1, 2, 3)]
    for log, found, day in zip(logs, seen.values(), ("no template", "2024-03-10", "['2024-03-10']"), strict=True):
        # the try rendered what it had to with what its worker held: it imported no part of jinja2 itself
        assert f"day={day} jinja={found['jinja2_before_fork']}" in log
