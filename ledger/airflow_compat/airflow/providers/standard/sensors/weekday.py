"""`airflow.providers.standard.sensors.weekday`."""

from ledger.airflow_compat.flow import DayOfWeekSensor

__all__ = ["DayOfWeekSensor"]
