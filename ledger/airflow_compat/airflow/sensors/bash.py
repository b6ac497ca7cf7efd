"""`airflow.sensors.bash`."""

from ledger.sensors import BashSensor

__all__ = ["BashSensor"]
