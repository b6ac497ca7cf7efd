"""`airflow.sensors.bash`."""

from ledger.airflow_compat.flow import BashSensor

__all__ = ["BashSensor"]
