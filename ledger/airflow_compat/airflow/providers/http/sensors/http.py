"""`airflow.providers.http.sensors.http` (ledger/airflow_compat/http.py)."""

from ledger.airflow_compat.http import HttpSensor

__all__ = ["HttpSensor"]
