"""`airflow.sensors.time_delta`."""

from ledger.airflow_compat.flow import TimeDeltaSensor, TimeDeltaSensorAsync

__all__ = ["TimeDeltaSensor", "TimeDeltaSensorAsync"]
