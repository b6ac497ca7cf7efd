"""`airflow.sensors.base`."""

from ledger.sensors import BaseSensor as BaseSensorOperator
from ledger.sensors import PokeReturnValue

__all__ = ["BaseSensorOperator", "PokeReturnValue"]
