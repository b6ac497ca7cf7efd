"""`airflow.sdk`: Airflow 3's authoring interface."""

from ledger.branching import setup, teardown
from ledger.dag import DAG, TaskGroup, task
from ledger.params import Param
from ledger.secrets import Variable
from ledger.sensors import BaseSensor as BaseSensorOperator
from ledger.sensors import PokeReturnValue

__all__ = ["DAG", "BaseSensorOperator", "Param", "PokeReturnValue", "TaskGroup", "Variable", "setup", "task",
           "teardown"]
