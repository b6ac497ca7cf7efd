"""`airflow.providers.standard.sensors.filesystem`."""

from ledger.airflow_compat.flow import FileSensor

__all__ = ["FileSensor"]
