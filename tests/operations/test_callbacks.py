"""Callbacks and notifiers: requested with the event they concern, each called once in a process of its own
with the code of the run's version, the outcome (ok, error, timeout) an event; a failing callback changes
no task's state. Driven through the real CLI and scheduler."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

CALLBACK_DAG = """
import json, os, pathlib, time
import pendulum
from datetime import timedelta
from ledger import DAG, BashTask

OUT = pathlib.Path(os.environ.get("CALLED_FILE", "/dev/null"))
WORD = "{word}"

def note(name):
    def record(context):
        with OUT.open("a") as f:
            f.write(json.dumps({{"name": name, "word": WORD, **context}}) + "\\n")
    record.__name__ = record.__qualname__ = "note_" + name
    return record

def broken(context):
    raise ValueError("the alert service is down")

def slow(context):
    time.sleep(30)

with DAG("cb", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         on_failure_callback=note("run_failed"), on_success_callback=note("run_succeeded")) as dag:
    ok = BashTask("ok", "true", on_success_callback=[note("ok_succeeded"), broken])
    flaky = BashTask("flaky", "exit 3", retries=1, retry_delay=timedelta(0),
                     on_retry_callback=note("flaky_retry"), on_failure_callback=[note("flaky_failed"), slow])
    ok >> flaky
"""


def _calls(cli: Cli) -> list[dict[str, Any]]:
    path = cli.home / "called.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_callbacks_run_once_each_with_the_runs_version_and_their_outcomes_are_events(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("cb.py", CALLBACK_DAG.format(word="first"))
    cli.ok("trigger", "cb")
    cli.write_dag("cb.py", CALLBACK_DAG.format(word="second"))  # a deploy after the run was created
    cli.ok("scheduler", "--exit-when-idle", LEDGER_CALLBACK_TIMEOUT="3", CALLED_FILE=str(cli.home / "called.jsonl"))
    calls = _calls(cli)
    names = sorted(c["name"] for c in calls)
    assert names == ["flaky_failed", "flaky_retry", "ok_succeeded", "run_failed"], calls
    assert {c["word"] for c in calls} == {"first"}  # the code of the run's version, not the edited file
    by_name = {c["name"]: c for c in calls}
    assert by_name["flaky_retry"]["try_number"] == 1 and by_name["flaky_failed"]["try_number"] == 2
    assert by_name["flaky_failed"]["kind"] == "task_failure" and by_name["flaky_failed"]["task_id"] == "flaky"
    assert "exit" in (by_name["flaky_failed"]["reason"] or "")
    assert by_name["run_failed"]["kind"] == "run_failure" and by_name["run_failed"]["state"] == "failed"
    assert by_name["run_failed"]["logical_date"] and by_name["run_failed"]["run_id"] == 1
    events = cli.json("events", "--dag", "cb")
    outcomes = sorted((e["details"]["target"].split(".")[-1], e["kind"]) for e in events
                      if e["kind"].startswith("callback_"))
    assert outcomes == sorted([
        ("note_ok_succeeded", "callback_ok"), ("broken", "callback_error"), ("note_flaky_retry", "callback_ok"),
        ("note_flaky_failed", "callback_ok"), ("slow", "callback_timeout"), ("note_run_failed", "callback_ok")])
    error = next(e for e in events if e["kind"] == "callback_error")
    assert error["run_id"] == "1" and error["details"]["task_id"] == "ok"
    assert "the alert service is down" in error["details"]["message"]
    # a failing callback changes nothing: `ok` succeeded, `flaky` failed on its own
    states = {t["task_id"]: t["state"] for t in cli.json("runs", "show", "1")["task_instances"]}
    assert states == {"ok": "success", "flaky": "failed"}
    listed = cli.json("callbacks", "--dag", "cb")
    assert sorted(r["state"] for r in listed) == ["error", "ok", "ok", "ok", "ok", "timeout"]
    assert {r["run_id"] for r in listed} == {"1"} and all(r["ended_at"] for r in listed)
    logs = sorted((cli.home / "logs" / "cb" / "run_1" / "callbacks").glob("*.log"))
    assert any("the alert service is down" in p.read_text() for p in logs)


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    _Hook.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


NOTIFY_DAG = """
import pendulum
from ledger import DAG, BashTask, WebhookNotifier

with DAG("notify", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         default_args={{"email": ["oncall@example.com"], "email_on_retry": False}},
         on_failure_callback=WebhookNotifier("{url}")) as dag:
    BashTask("fails", "echo boom; exit 1")
"""


def test_email_and_webhook_notifiers_tell_people_when_a_run_fails(
        ready_cli: Cli, webhook: str, smtp_server: tuple[int, list[Any]]) -> None:
    cli = ready_cli
    port, mails = smtp_server
    cli.write_dag("notify.py", NOTIFY_DAG.format(url=webhook))
    shown = cli.ok("dags", "show", "notify")
    assert "ignored" not in shown  # email is acted on now
    cli.ok("trigger", "notify")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_SMTP_HOST="127.0.0.1", LEDGER_SMTP_PORT=str(port),
           LEDGER_SMTP_FROM="ledger@test.example")
    assert len(mails) == 1, mails
    mail = mails[0]
    assert mail.rcpt_tos == ["oncall@example.com"] and mail.mail_from == "ledger@test.example"
    text = mail.content.decode()
    assert "Subject: [ledger] task_failure: notify.fails run 1 try 1" in text
    assert len(_Hook.received) == 1
    hook = _Hook.received[0]
    assert hook["kind"] == "run_failure" and hook["dag_id"] == "notify" and hook["run_id"] == 1
    assert hook["text"].startswith("run_failure: notify run 1")
    kinds = [e["kind"] for e in cli.json("events", "--dag", "notify")]
    assert kinds.count("callback_ok") == 2


def test_a_callback_that_cannot_reach_its_service_is_an_error_event(ready_cli: Cli) -> None:
    """With one callback process at a time, the second call waits for the first: --exit-when-idle still makes
    both before it exits (none is left pending)."""
    cli = ready_cli
    cli.write_dag("notify.py", NOTIFY_DAG.format(url="http://127.0.0.1:9/nothing-listens"))
    cli.ok("trigger", "notify")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_SMTP_HOST="127.0.0.1", LEDGER_SMTP_PORT="9",
           LEDGER_CALLBACK_PARALLELISM="1")
    assert [c["state"] for c in cli.json("callbacks")] == ["error", "error"]
    errors = [e for e in cli.json("events", "--dag", "notify") if e["kind"] == "callback_error"]
    assert len(errors) == 2
    assert all("refused" in e["details"]["message"].lower() for e in errors), errors
    assert cli.json("runs", "show", "1")["state"] == "failed"


def test_callbacks_that_are_not_callable_are_import_errors(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("bad.py", """
import pendulum
from ledger import DAG, BashTask

with DAG("bad", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("a", "true", on_failure_callback="page me")
""")
    errors = cli.json("dags", "errors")
    assert any("on_failure_callback must be a callable" in e["error"] for e in errors), errors


def test_a_dag_without_callbacks_keeps_its_version_hash(ready_cli: Cli) -> None:
    """Callbacks enter the version only when given: existing DAGs keep the versions they had."""
    cli = ready_cli
    cli.write_dag("daily.py", (Path(__file__).parent.parent / "conftest.py").read_text().split('DAILY_DAG = """')[1]
                  .split('"""')[0])
    structure = cli.json("dags", "show", "daily")
    assert "callbacks" not in json.dumps(structure)


TIMEOUT_DAGS = """
import json, os, pathlib
import pendulum
from datetime import timedelta
from ledger import DAG, BashTask

def late(context):
    with pathlib.Path(os.environ["CALLED_FILE"]).open("a") as f:
        f.write(json.dumps(context) + "\\n")

with DAG("slow_run", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         dagrun_timeout=timedelta(seconds=2)) as slow_run:
    BashTask("sleepy", "sleep 60") >> BashTask("after", "true")

with DAG("late", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         deadline=timedelta(hours=1), on_deadline_missed=late) as late_dag:
    BashTask("quick", "true")
"""


def test_dagrun_timeout_fails_the_run_and_a_missed_deadline_is_recorded_once(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("timeouts.py", TIMEOUT_DAGS)
    cli.ok("trigger", "slow_run")
    cli.ok("trigger", "late", "--logical-date", "2024-03-01")  # its deadline passed long ago
    cli.ok("scheduler", "--exit-when-idle", CALLED_FILE=str(cli.home / "called.jsonl"))
    run = cli.json("runs", "show", "1")
    assert run["state"] == "failed"
    states = {t["task_id"]: t["state"] for t in run["task_instances"]}
    assert states == {"sleepy": "stopped", "after": "skipped"}
    changed = [e for e in cli.json("events", "--run", "1") if e["kind"] == "run_state_changed"
               and e["details"]["to"] == "failed"]
    assert len(changed) == 1 and "dagrun_timeout of 2 s passed" in changed[0]["details"]["reason"]
    log = (cli.home / "logs" / "slow_run" / "run_1" / "sleepy" / "try_1.log").read_text()
    assert log.rstrip().splitlines()[-1].endswith("outcome: stopped by the run's dagrun_timeout of 2 s"), log
    missed = [e for e in cli.json("events", "--dag", "late") if e["kind"] == "deadline_missed"]
    assert len(missed) == 1 and missed[0]["details"]["deadline"].startswith("2024-03-01T01:00:00")
    assert cli.json("runs", "show", "2")["state"] == "success"  # late is not failed
    calls = _calls(cli)
    assert len(calls) == 1 and calls[0]["kind"] == "deadline_missed" and calls[0]["run_id"] == 2
    cli.ok("scheduler", "--exit-when-idle", CALLED_FILE=str(cli.home / "called.jsonl"))  # nothing again
    assert len(_calls(cli)) == 1
