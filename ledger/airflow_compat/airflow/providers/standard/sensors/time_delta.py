"""`airflow.providers.standard.sensors.time_delta`."""

from ledger.sensors import TimeDeltaSensor, TimeDeltaSensorAsync

__all__ = ["TimeDeltaSensor", "TimeDeltaSensorAsync"]
