"""`airflow.sensors.base`."""

from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.sdk.sensors import PokeReturnValue

__all__ = ["BaseSensorOperator", "PokeReturnValue"]
