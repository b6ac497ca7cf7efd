"""`airflow.sensors.weekday`."""

from ledger.sensors import DayOfWeekSensor

__all__ = ["DayOfWeekSensor"]
