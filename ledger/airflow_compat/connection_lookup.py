"""How Airflow's providers find a connection in ledger: ledger's connections, then AIRFLOW_CONN_<ID>. Below the
providers (sql, http, s3, smtp, spark), which all ask it."""

from __future__ import annotations

from ledger.airflow_compat.graph import AirflowNotFoundException
from ledger.sdk.connections import ConnectionInfo
from ledger.sdk.secrets import find_connection


def connection(conn_id: str) -> ConnectionInfo:
    """The connection `conn_id`: ledger's, then AIRFLOW_CONN_<ID>; AirflowNotFoundException naming both."""
    try:
        return find_connection(conn_id)
    except LookupError as exc:
        raise AirflowNotFoundException(str(exc).strip("'\"")) from None
