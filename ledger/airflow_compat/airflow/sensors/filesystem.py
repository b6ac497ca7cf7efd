"""`airflow.sensors.filesystem`."""

from ledger.sensors import FileSensor

__all__ = ["FileSensor"]
