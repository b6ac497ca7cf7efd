"""`airflow.providers.standard.sensors.python`."""

from ledger.sensors import PokeReturnValue, PythonSensor

__all__ = ["PokeReturnValue", "PythonSensor"]
