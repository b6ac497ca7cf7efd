"""Which way task code reaches the ledger (ledger/sdk/ledger_client.py, ledger/infra/worker_client.py: reach): the
database where the try has it, ledger's webserver where it has not, one line and nothing created where it has neither;
a worker's try loads no database layer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.errors import ConfigError
from ledger.infra.worker_client import API, DATABASE, Place, WorkerClient, reach
from ledger.sdk.ledger_client import open_client
from ledger.services.task_calls import DatabaseClient
from tests.conftest import REPO, copy_migrated


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
        assert first.startswith("ConfigError this try cannot reach the ledger: there is no database at ")
    else:  # nothing listens there
        assert first.startswith("ConfigError cannot send signal 'ci.hello' through ledger's webserver at "
                                "http://127.0.0.1:9: ")
    assert loaded == "sqlalchemy loaded: False"
    assert not (tmp_path / "home").exists()
