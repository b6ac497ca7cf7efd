"""`airflow.sensors.python`."""

from ledger.airflow_compat.flow import PythonSensor
from ledger.sensors import PokeReturnValue

__all__ = ["PokeReturnValue", "PythonSensor"]
