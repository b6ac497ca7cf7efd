"""`airflow.sensors.filesystem`."""

from ledger.airflow_compat.flow import FileSensor

__all__ = ["FileSensor"]
