"""`airflow.sensors.python`."""

from ledger.airflow_compat.flow import PythonSensor
from ledger.sdk.sensors import PokeReturnValue

__all__ = ["PokeReturnValue", "PythonSensor"]
