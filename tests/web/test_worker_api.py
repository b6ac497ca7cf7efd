"""What a worker's token reads besides code: variables and connections, one name at a time, read-only; nothing for
the shared read token, nothing from a server without a worker's token."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli

AS_WORKER = {"Authorization": "Bearer w0rker"}


def test_a_workers_token_reads_a_variable_and_a_connection_by_name_and_the_read_token_reads_neither(
        ready_cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("LEDGER_FERNET_KEY", key)
    ready_cli.ok("variables", "set", "api_password", "s3cr3t-value", LEDGER_FERNET_KEY=key)
    ready_cli.ok("connections", "add", "warehouse", "--uri", "postgresql://bob:pw-123456@db.example:5432/sales",
                 LEDGER_FERNET_KEY=key)
    settings = load_settings({"LEDGER_HOME": str(ready_cli.home)})
    with TestClient(create_app(settings, token="s3cret", worker_token="w0rker"), base_url="http://localhost") as c:
        assert c.get("/api/v1/worker/variables/api_password", headers=AS_WORKER).json() == {
            "key": "api_password", "value": "s3cr3t-value"}
        assert c.get("/api/v1/worker/connections/warehouse", headers=AS_WORKER).json() == {
            "conn_id": "warehouse", "conn_type": "postgresql", "host": "db.example", "port": 5432, "login": "bob",
            "schema": "sales", "password": "pw-123456", "extra": None}
        missing = c.get("/api/v1/worker/variables/nothing", headers=AS_WORKER)
        assert missing.status_code == 404 and "variable 'nothing' is not set" in missing.json()["message"]
        assert c.get("/api/v1/worker/connections/nothing", headers=AS_WORKER).status_code == 404
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            assert c.get("/api/v1/worker/variables/api_password", headers=headers).status_code == 401
        reader = c.get("/api/v1/worker/variables/api_password", headers={"Authorization": "Bearer s3cret"})
        assert reader.status_code == 403 and "LEDGER_WORKER_TOKEN only" in reader.json()["message"]
        assert c.post("/api/v1/worker/variables/api_password", headers=AS_WORKER).status_code == 405  # read-only
    with TestClient(create_app(settings, token="s3cret"), base_url="http://localhost") as c:
        refused = c.get("/api/v1/worker/connections/warehouse", headers={"Authorization": "Bearer s3cret"})
        assert refused.status_code == 403 and "no LEDGER_WORKER_TOKEN" in refused.json()["message"]


CALLED = """
import pendulum
from ledger import DAG, PythonTask

with DAG("called", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         params={"n": 1}) as dag:
    PythonTask("work", lambda: None)
"""
TRY = "task:caller.go@run 1 try 1"


def test_a_workers_token_sends_signals_and_triggers_runs_as_a_try_through_the_clis_rules(ready_cli: Cli) -> None:
    (ready_cli.home / "dags").mkdir(exist_ok=True)
    (ready_cli.home / "dags" / "called.py").write_text(CALLED)
    ready_cli.ok("dags", "list")
    settings = load_settings({"LEDGER_HOME": str(ready_cli.home)})
    with TestClient(create_app(settings, token="s3cret", worker_token="w0rker"), base_url="http://localhost") as c:
        sent = c.post("/api/v1/worker/signals", json={"key": "ci.hello", "value": "hi", "sender": TRY},
                      headers=AS_WORKER)
        assert sent.status_code == 201, sent.text
        assert (sent.json()["key"], sent.json()["version"], sent.json()["sender"]) == ("ci.hello", 1, TRY)
        for body, reason in (({"key": "ci.hello", "value": "hi", "sender": "admin"}, "a try acts as task:"),
                             ({"key": "bad key", "value": "hi", "sender": TRY}, "signal key")):
            refused = c.post("/api/v1/worker/signals", json=body, headers=AS_WORKER)
            assert refused.status_code == 400 and reason in refused.json()["message"], refused.text
        for headers, status in (({"Authorization": "Bearer s3cret"}, 403), ({}, 401)):
            assert c.post("/api/v1/worker/signals", json={"key": "ci.hello", "value": "x", "sender": TRY},
                          headers=headers).status_code == status
        assert [(s["version"], s["sender"]) for s in ready_cli.json("signal", "list", "ci.hello")] == [(1, TRY)]
        sent_events = ready_cli.json("events", "--kind", "signal_sent")
        assert [e["actor"] for e in sent_events] == [TRY]

        at = "2024-01-05T00:00:00+00:00"
        made = c.post("/api/v1/worker/dags/called/runs", json={"logical_date": at, "conf": {"n": 2}, "actor": TRY},
                      headers=AS_WORKER)
        assert made.status_code == 201, made.text
        run_id = made.json()["run_id"]
        assert made.json() == {"run_id": run_id, "logical_date": at, "replaced_run_id": None}
        created = [e for e in ready_cli.json("events", "--dag", "called", "--kind", "run_created")]
        assert [(e["run_id"], e["actor"]) for e in created] == [(run_id, TRY)]
        again = c.post("/api/v1/worker/dags/called/runs", json={"logical_date": at, "actor": TRY}, headers=AS_WORKER)
        assert again.status_code == 409, again.text
        bad_conf = c.post("/api/v1/worker/dags/called/runs", headers=AS_WORKER,
                          json={"logical_date": "2024-01-06T00:00:00+00:00", "conf": {"n": "x"}, "actor": TRY})
        assert bad_conf.status_code == 400, bad_conf.text
        unknown = c.post("/api/v1/worker/dags/nothing/runs", json={"logical_date": at, "actor": TRY},
                         headers=AS_WORKER)
        assert unknown.status_code == 404 and "no DAG named 'nothing'" in unknown.json()["message"]
        naive = c.post("/api/v1/worker/dags/called/runs", json={"logical_date": "2024-01-07T00:00:00", "actor": TRY},
                       headers=AS_WORKER)
        assert naive.status_code == 400 and "has no timezone" in naive.json()["message"]
        assert [r["run_id"] for r in ready_cli.json("timeline", "called")] == [run_id]  # the refusals made none

        assert c.get(f"/api/v1/worker/runs/{run_id}", headers=AS_WORKER).json() == {"run_id": run_id,
                                                                                   "state": "queued"}
        assert c.get("/api/v1/worker/runs/999", headers=AS_WORKER).status_code == 404
        states = c.get("/api/v1/worker/dags/called/states", params={"at": at}, headers=AS_WORKER).json()
        assert states["run_state"] == "queued"
        none = c.get("/api/v1/worker/dags/called/states", params={"at": "2024-02-01T00:00:00+00:00"},
                     headers=AS_WORKER).json()
        assert (none["run_state"], none["tasks"]) == (None, {})
