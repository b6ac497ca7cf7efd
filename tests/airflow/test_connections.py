"""`{{ conn.ID }}` in templates finds a connection as Airflow's provider hooks do: LEDGER_CONN_<ID>, the ledger, then
AIRFLOW_CONN_<ID> (a URI, or Airflow 2.3+'s JSON). Against a stand-in for the ledger's client, in process."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ledger.airflow_compat.connection_lookup import connection
from ledger.sdk import secrets
from ledger.sdk.templates import TemplateError, _Connections, render


class StoredConnections:
    """The ledger's client, holding `stored` connections (by id: their fields) and no variable."""

    def __init__(self, stored: dict[str, dict[str, Any]]) -> None:
        self.stored = stored

    def variable(self, key: str) -> str | None:
        return None

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        return self.stored.get(conn_id)


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """The connections the ledger holds (empty: add to it), with no AIRFLOW_CONN_ or LEDGER_CONN_ variable in the
    environment and no secret seen yet."""
    found: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(secrets, "client", lambda: StoredConnections(found))
    monkeypatch.setattr(secrets, "_seen", set())
    for name in [n for n in os.environ if n.startswith(("AIRFLOW_CONN_", "LEDGER_CONN_"))]:
        monkeypatch.delenv(name)
    return found


def rendered(template: str) -> Any:
    return render(template, {"conn": _Connections()}, field="bash_command")


def test_a_template_reads_a_connection_from_an_airflow_conn_uri_and_masks_its_password(
        stored: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ENVDB", "postgres://u:p-secret@envhost:5432/x?sslmode=require")
    assert rendered("{{ conn.envdb.host }}:{{ conn.envdb.port }} {{ conn.envdb.login }} {{ conn.envdb.schema }} "
                    "{{ conn.envdb.extra_dejson.sslmode }}") == "envhost:5432 u x require"
    assert secrets.mask(rendered("{{ conn.envdb.password }}")) == "***"  # a secret the try read


def test_a_template_and_a_provider_hook_read_airflows_json_form_of_airflow_conn_alike(
        stored: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_JSONDB", '{"conn_type": "postgres", "host": "jsonhost", "port": "5433", '
                                              '"login": "u", "password": "pw-json", "schema": "dw", '
                                              '"extra": {"sslmode": "verify-full"}}')
    assert rendered("{{ conn.jsondb.conn_type }} {{ conn.jsondb.host }} {{ conn.jsondb.port + 1 }} "
                    "{{ conn.jsondb.extra_dejson.sslmode }}") == "postgres jsonhost 5434 verify-full"
    hooks = connection("jsondb")  # what SQL, HTTP, S3, SMTP and Spark hooks are given
    assert (hooks.host, hooks.port, hooks.login, hooks.password, hooks.schema) == ("jsonhost", 5433, "u", "pw-json",
                                                                                   "dw")
    assert secrets.mask("pw-json") == "***"


def test_ledgers_connection_comes_before_airflow_conn_as_for_the_hooks(
        stored: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    stored["db"] = {"conn_id": "db", "conn_type": "postgres", "host": "stored-host"}
    monkeypatch.setenv("AIRFLOW_CONN_DB", "postgres://airflow-host")
    monkeypatch.setenv("AIRFLOW_CONN_OTHER", "postgres://airflow-host")
    monkeypatch.setenv("LEDGER_CONN_OTHER", "postgres://ledger-host")
    monkeypatch.setenv("AIRFLOW_CONN_ONLY", "postgres://airflow-host")
    assert rendered("{{ conn.db.host }} {{ conn.other.host }} {{ conn.only.host }}") == \
        "stored-host ledger-host airflow-host"


def test_a_connection_nowhere_or_an_unreadable_airflow_conn_fails_the_template_in_one_line(
        stored: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TemplateError, match=r"^template error in bash_command: connection 'nope' is not defined "
                                            r"\(LEDGER_CONN_NOPE, ledger connections add, or AIRFLOW_CONN_NOPE\)$"):
        rendered("{{ conn.nope.host }}")
    monkeypatch.setenv("AIRFLOW_CONN_BAD", '{"host": "h", "password": "pw-bad", ')
    with pytest.raises(TemplateError) as raised:
        rendered("{{ conn.bad.host }}")
    assert "AIRFLOW_CONN_BAD" in str(raised.value) and "pw-bad" not in str(raised.value)
