"""`airflow.sensors.external_task`."""

from ledger.airflow_compat.flow import ExternalTaskMarker, ExternalTaskSensor

__all__ = ["ExternalTaskMarker", "ExternalTaskSensor"]
