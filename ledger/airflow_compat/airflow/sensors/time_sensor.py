"""`airflow.sensors.time_sensor`."""

from ledger.sensors import TimeSensor, TimeSensorAsync

__all__ = ["TimeSensor", "TimeSensorAsync"]
