"""`airflow.sensors.time_sensor`."""

from ledger.airflow_compat.flow import TimeSensor, TimeSensorAsync

__all__ = ["TimeSensor", "TimeSensorAsync"]
