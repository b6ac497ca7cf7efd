"""`airflow.sensors.base`."""

from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.sensors import PokeReturnValue

__all__ = ["BaseSensorOperator", "PokeReturnValue"]
