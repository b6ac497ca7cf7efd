"""Airflow's Variable in task code and DAG files: a missing variable raises a KeyError (which DAG files catch), and
AIRFLOW_VAR_<KEY> is read first, as Airflow's environment secrets backend is. Against a stand-in for the ledger's
client (what the ledger stores), in process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk import secrets
from ledger.sdk.secrets import Variable


class StoredOnly:
    """The ledger's client, holding `stored` variables and no connection."""

    def __init__(self, stored: dict[str, str]) -> None:
        self.stored = stored

    def variable(self, key: str) -> str | None:
        return self.stored.get(key)

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        return None


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The variables the ledger holds (empty: add to it), with no AIRFLOW_ or LEDGER_ variable in the environment."""
    found: dict[str, str] = {}
    monkeypatch.setattr(secrets, "client", lambda: StoredOnly(found))
    for name in [n for n in os.environ if n.startswith(("AIRFLOW_VAR_", "LEDGER_VAR_"))]:
        monkeypatch.delenv(name)
    return found


def test_a_missing_variable_without_a_default_is_a_key_error_naming_where_it_was_looked_for(
        stored: dict[str, str]) -> None:
    with pytest.raises(KeyError) as raised:
        Variable.get("target_table")
    assert str(raised.value) == ("variable 'target_table' is not set (LEDGER_VAR_TARGET_TABLE, "
                                 "AIRFLOW_VAR_TARGET_TABLE, or ledger variables set)")
    assert isinstance(raised.value, LookupError)  # ledger's callers that catch LookupError still do
    assert Variable.get("target_table", default_var=None) is None


def test_airflow_var_in_the_environment_is_read_before_the_stored_variable_and_after_ledger_var(
        stored: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    stored.update(from_env="stored", both="stored", cfg='{"n": 1}')
    monkeypatch.setenv("AIRFLOW_VAR_FROM_ENV", "envval")  # the key upper-cased, as Airflow names it
    monkeypatch.setenv("AIRFLOW_VAR_BOTH", "airflow's")
    monkeypatch.setenv("LEDGER_VAR_BOTH", "ledger's")
    monkeypatch.setenv("AIRFLOW_VAR_CFG", '{"n": 2}')
    assert Variable.get("from_env") == Variable.get("from_env", default_var="unset") == "envval"
    assert Variable.get("both") == "ledger's"
    assert Variable.get("cfg", deserialize_json=True) == {"n": 2}


def test_a_secret_variable_read_from_airflow_var_is_masked_in_the_tries_log(
        stored: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", "tok-from-env")
    monkeypatch.setattr(secrets, "_seen", set())
    assert Variable.get("api_token") == "tok-from-env"
    assert secrets.mask("calling with tok-from-env") == "calling with ***"


FALLBACK = """
import pendulum
from airflow import DAG
from airflow.models import Variable
from airflow.operators.bash import BashOperator

try:
    TARGET = Variable.get("target_table")
except KeyError:
    TARGET = "default_table"

with DAG("fallback", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="b", bash_command=f"echo {TARGET}")
"""


@pytest.fixture
def airflow_modules_dropped() -> Iterator[None]:
    yield
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


@pytest.mark.usefixtures("airflow_modules_dropped")
def test_a_dag_file_catching_key_error_for_a_missing_variable_loads_with_its_fallback(
        stored: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "fallback.py").write_text(FALLBACK)
    loaded = load_file(str(tmp_path / "fallback.py"), str(tmp_path))
    assert loaded.error is None, loaded.error
    [dag] = loaded.dags
    assert dag.tasks["b"].bash_command == "echo default_table"  # type: ignore[attr-defined]
