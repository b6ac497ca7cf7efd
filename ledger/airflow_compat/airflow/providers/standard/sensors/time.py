"""`airflow.providers.standard.sensors.time`."""

from ledger.airflow_compat.flow import TimeSensor, TimeSensorAsync

__all__ = ["TimeSensor", "TimeSensorAsync"]
