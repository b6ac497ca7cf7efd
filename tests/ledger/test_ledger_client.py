"""Which way task code reaches the ledger (ledger/sdk/ledger_client.py, ledger/infra/worker_client.py: reach): the
database where the try has it, ledger's webserver where it has not, one line and nothing created where it has neither;
a worker's try loads no database layer."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from ledger.core.errors import ConfigError, InvalidInput, TimelineConflict
from ledger.infra.worker_client import API, DATABASE, Place, WorkerClient, reach
from ledger.sdk.ledger_client import LedgerClient, open_client
from ledger.services.task_calls import DatabaseClient
from tests.conftest import REPO, Cli, _environment, copy_migrated
from tests.web.conftest import served


def test_a_try_whose_home_holds_the_database_reaches_the_database_even_when_it_knows_a_webserver(
        tmp_path: Path, migrated_sqlite: Path) -> None:
    copy_migrated(migrated_sqlite, tmp_path / "ledger.db")
    place = reach({"LEDGER_HOME": str(tmp_path), "LEDGER_API_URL": "http://127.0.0.1:8080"})
    assert place == Place(DATABASE, f"sqlite:///{tmp_path / 'ledger.db'}")
    assert isinstance(open_client(place), DatabaseClient)


def test_a_database_server_is_reached_without_looking_for_a_file(tmp_path: Path) -> None:
    env = {"LEDGER_HOME": str(tmp_path), "LEDGER_DATABASE_URL": "postgresql://ledger@db.example:5432/ledger",
           "LEDGER_API_URL": "http://127.0.0.1:8080"}
    assert reach(env) == Place(DATABASE, "postgresql+psycopg://ledger@db.example:5432/ledger")


def test_a_try_without_a_database_reaches_the_webserver_with_the_workers_token(tmp_path: Path) -> None:
    place = reach({"LEDGER_HOME": str(tmp_path), "LEDGER_API_URL": " http://10.0.0.5:8080/ ",
                   "LEDGER_WORKER_TOKEN": "w0rker"})
    assert place == Place(API, "http://10.0.0.5:8080", "w0rker")
    client = open_client(place)
    assert isinstance(client, WorkerClient) and (client.api, client.token) == ("http://10.0.0.5:8080", "w0rker")
    assert list(tmp_path.iterdir()) == []


def test_a_try_with_neither_a_database_nor_a_webserver_is_refused_with_one_line_and_nothing_is_created(
        tmp_path: Path) -> None:
    home = tmp_path / "worker"
    with pytest.raises(ConfigError) as refused:
        reach({"LEDGER_HOME": str(home), "LEDGER_API_URL": "  "})
    assert str(refused.value) == (
        f"this try cannot reach the ledger: there is no database at {home / 'ledger.db'} and no LEDGER_API_URL; a "
        "try on a worker reaches ledger's webserver (start `ledger worker` with LEDGER_API_URL and "
        "LEDGER_WORKER_TOKEN)")
    assert not home.exists()


SEND_FROM_A_TRY = """
import sys
import pendulum
from ledger.sdk.context import TaskContext

at = pendulum.datetime(2024, 1, 1, tz="UTC")
context = TaskContext("d", "t", "7", at, at, at, 1, "v1", "scheduled")
try:
    context.send_signal("ci.hello", "hi")
except Exception as exc:
    print(type(exc).__name__, exc)
print("sqlalchemy loaded:", "sqlalchemy" in sys.modules)
"""


@pytest.mark.parametrize("api_url", [None, "http://127.0.0.1:9"])
def test_a_signal_sent_from_a_try_that_reaches_no_ledger_fails_with_one_line_and_loads_no_database_layer(
        tmp_path: Path, api_url: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO),
               **({"LEDGER_API_URL": api_url, "LEDGER_WORKER_TOKEN": "w0rker"} if api_url else {}))
    done = subprocess.run([sys.executable, "-c", SEND_FROM_A_TRY], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    first, loaded = done.stdout.splitlines()
    if api_url is None:
        assert first.startswith("NoLedger this try cannot reach the ledger: there is no database at ")
    else:  # nothing listens there
        assert first.startswith("ConfigError cannot send signal 'ci.hello' through ledger's webserver at "
                                "http://127.0.0.1:9: ")
    assert loaded == "sqlalchemy loaded: False"
    assert not (tmp_path / "home").exists()


CALLED = """
import pendulum
from ledger import DAG, PythonTask

with DAG("called", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         params={"n": 1}):
    PythonTask("work", lambda: None)
"""
TRY = "task:caller.go@run 1 try 1"


@pytest.fixture(params=[DATABASE, API])
def both(request: pytest.FixtureRequest, ready_cli: Cli) -> Iterator[tuple[Cli, LedgerClient]]:
    """A ledger with the DAG `called`, a variable and a connection, reached as a scheduler's try reaches it (its
    database) and as a worker's (a real `ledger webserver` with the workers' token)."""
    key = Fernet.generate_key().decode()
    cli = Cli(home=ready_cli.home, env={**ready_cli.env, "LEDGER_FERNET_KEY": key, "LEDGER_WORKER_TOKEN": "w0rker"})
    cli.write_dag("called.py", CALLED)
    cli.ok("dags", "list")
    cli.ok("variables", "set", "api_password", "s3cr3t-value")
    cli.ok("connections", "add", "warehouse", "--uri", "postgresql://bob:pw-123456@db.example:5432/sales")
    if request.param == DATABASE:
        with _environment({**cli.env}):
            yield cli, open_client(reach())
        return
    with served(cli) as base, _environment({**cli.env}):
        yield cli, open_client(Place(API, base, "w0rker"))


def test_both_ways_send_trigger_read_and_refuse_alike_through_the_clis_rules(
        both: tuple[Cli, LedgerClient]) -> None:
    cli, client = both
    sent = client.send_signal("ci.hello", "hi", sender=TRY, meta={"n": 1})
    assert (sent.key, sent.version, sent.sender, sent.meta) == ("ci.hello", 1, TRY, {"n": 1})
    for key, sender, reason in (("ci.hello", "admin", "a try acts as task:"), ("bad key", TRY, "signal key")):
        with pytest.raises(InvalidInput, match=reason):
            client.send_signal(key, "hi", sender=sender)
    assert [(s["version"], s["sender"]) for s in cli.json("signal", "list", "ci.hello")] == [(1, TRY)]
    assert [e["actor"] for e in cli.json("events", "--kind", "signal_sent")] == [TRY]

    at = datetime(2024, 1, 5, tzinfo=UTC)
    made = client.trigger_run("called", at, {"n": 2}, replace=False, actor=TRY)
    assert (made.logical_date, made.replaced_run_id) == (at, None)
    with pytest.raises(TimelineConflict):
        client.trigger_run("called", at, {}, replace=False, actor=TRY)
    with pytest.raises(InvalidInput, match="'n'"):
        client.trigger_run("called", datetime(2024, 1, 6, tzinfo=UTC), {"n": "x"}, replace=False, actor=TRY)
    with pytest.raises(LookupError, match="no DAG named 'nothing'"):
        client.trigger_run("nothing", at, {}, replace=False, actor=TRY)
    [created] = cli.json("events", "--dag", "called", "--kind", "run_created")
    assert (created["run_id"], created["actor"]) == (str(made.run_id), TRY)
    assert [r["run_id"] for r in cli.json("timeline", "called")] == [str(made.run_id)]  # the refusals made none

    assert client.run_state(made.run_id) == "queued"
    with pytest.raises(LookupError):
        client.run_state(made.run_id + 100)
    found = client.states_at("called", at)
    assert found is not None and found[0] == "queued"
    assert client.states_at("called", datetime(2024, 2, 1, tzinfo=UTC)) is None

    assert client.variable("api_password") == "s3cr3t-value" and client.variable("nothing") is None
    assert client.connection("warehouse") == {
        "conn_id": "warehouse", "conn_type": "postgresql", "host": "db.example", "port": 5432, "login": "bob",
        "schema": "sales", "password": "pw-123456", "extra": None}
    assert client.connection("nothing") is None
