"""`airflow.sensors.external_task`."""

from ledger.external_task import ExternalTaskMarker, ExternalTaskSensor

__all__ = ["ExternalTaskMarker", "ExternalTaskSensor"]
