"""`airflow.providers.standard.sensors.time`."""

from ledger.sensors import TimeSensor, TimeSensorAsync

__all__ = ["TimeSensor", "TimeSensorAsync"]
