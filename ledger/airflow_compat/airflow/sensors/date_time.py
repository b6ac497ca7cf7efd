"""`airflow.sensors.date_time`."""

from ledger.airflow_compat.flow import DateTimeSensor, DateTimeSensorAsync

__all__ = ["DateTimeSensor", "DateTimeSensorAsync"]
