"""`airflow.providers.standard.sensors.date_time`."""

from ledger.sensors import DateTimeSensor, DateTimeSensorAsync

__all__ = ["DateTimeSensor", "DateTimeSensorAsync"]
