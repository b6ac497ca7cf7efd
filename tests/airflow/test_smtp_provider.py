"""Airflow's e-mail in ledger's namespace (ledger/airflow_compat/smtp.py): the SMTP provider's EmailOperator and
SmtpHook through an SMTP connection from an AIRFLOW_CONN_* variable, and `airflow.utils.email.send_email` through
ledger's own SMTP settings, against a real SMTP server (aiosmtpd) on loopback started by the test. Run in process
by `ledger dags test`'s loop, each try in a forked child as under the scheduler."""

from __future__ import annotations

import email
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

DAG_FILE = """\
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.email import EmailOperator as CoreEmailOperator
from airflow.providers.smtp.hooks.smtp import SmtpHook
from airflow.providers.smtp.operators.smtp import EmailOperator
from airflow.utils.email import send_email

with DAG("mails", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    report = EmailOperator(task_id="report", conn_id="mail", to="a@example.com; b@example.com",
                           subject="orders of {{ ds }}", html_content="<p>{{ params.rows }} rows</p>",
                           custom_headers={"X-Run": "{{ ds_nodash }}"}, params={"rows": 3})
    core = CoreEmailOperator(task_id="core", to=["ops@example.com"], subject="through ledger's settings",
                             html_content="<b>ok</b>")

    @task
    def by_hand():
        send_email("c@example.com", "util", "<i>sent</i>", cc="d@example.com", from_email="etl@example.com")
        with SmtpHook(smtp_conn_id="mail") as hook:
            hook.send_email_smtp(to="e@example.com", subject="hook", html_content="<p>hook</p>")
        try:
            SmtpHook(smtp_conn_id="nowhere").get_conn()
        except Exception as exc:
            return str(exc)

    report >> core >> by_hand()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_email_operator_smtp_hook_and_send_email_reach_a_real_smtp_server(
        smtp_server: tuple[int, list[Any]], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port, received = smtp_server
    extra = json.dumps({"disable_ssl": True, "disable_tls": True, "from_email": "airflow@example.com"})
    monkeypatch.setenv("AIRFLOW_CONN_MAIL", f"smtp://127.0.0.1:{port}?__extra__={extra}")
    monkeypatch.setenv("LEDGER_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("LEDGER_SMTP_PORT", str(port))
    monkeypatch.setenv("LEDGER_SMTP_FROM", "ledger@example.com")
    (folder / "mails.py").write_text(DAG_FILE)
    loaded = load_file(str(folder / "mails.py"), str(folder))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    run = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    state = local_testing.test_dag(run, lines.append)
    assert state is RunState.SUCCESS, "\n".join(lines)
    sent = [(env.mail_from, env.rcpt_tos, email.message_from_bytes(env.content)) for env in received]
    assert [(sender, to, m["Subject"]) for sender, to, m in sent] == [
        ("airflow@example.com", ["a@example.com", "b@example.com"], "orders of 2024-03-05"),
        ("ledger@example.com", ["ops@example.com"], "through ledger's settings"),
        ("etl@example.com", ["c@example.com", "d@example.com"], "util"),
        ("airflow@example.com", ["e@example.com"], "hook")]
    report = sent[0][2]
    assert report["X-Run"] == "20240305"
    assert report.get_payload(decode=True).decode().strip() == "<p>3 rows</p>"
    assert run.xcom["by_hand"]["return_value"].startswith("connection 'nowhere' is not defined")
