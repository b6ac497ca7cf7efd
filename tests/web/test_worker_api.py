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



TRY = "task:caller.go@run 1 try 1"


def test_only_a_workers_token_acts_and_only_as_a_try_with_dates_that_name_their_timezone(ready_cli: Cli) -> None:
    """(What the calls do, through this API and on the database alike: tests/ledger/test_ledger_client.py.)"""
    settings = load_settings({"LEDGER_HOME": str(ready_cli.home)})
    signal = {"key": "ci.hello", "value": "hi", "sender": TRY}
    with TestClient(create_app(settings, token="s3cret", worker_token="w0rker"), base_url="http://localhost") as c:
        for headers, status in (({"Authorization": "Bearer s3cret"}, 403), ({}, 401)):
            assert c.post("/api/v1/worker/signals", json=signal, headers=headers).status_code == status
            assert c.post("/api/v1/worker/dags/called/runs", json={"logical_date": "2024-01-07T00:00:00+00:00",
                                                                  "actor": TRY}, headers=headers).status_code == status
        posing = c.post("/api/v1/worker/signals", json={**signal, "sender": "admin"}, headers=AS_WORKER)
        assert posing.status_code == 400 and "a try acts as task:" in posing.json()["message"]
        naive = c.post("/api/v1/worker/dags/called/runs", json={"logical_date": "2024-01-07T00:00:00", "actor": TRY},
                       headers=AS_WORKER)
        assert naive.status_code == 400 and "has no timezone" in naive.json()["message"]
        unknown = c.post("/api/v1/worker/signals", json={**signal, "extra": 1}, headers=AS_WORKER)
        assert unknown.status_code == 400
        sent = c.post("/api/v1/worker/signals", json=signal, headers=AS_WORKER)
        assert sent.status_code == 201 and sent.json()["sender"] == TRY
    assert [s["sender"] for s in ready_cli.json("signal", "list")] == [TRY]  # the refused ones stored nothing
