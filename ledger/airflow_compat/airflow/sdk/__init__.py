"""`airflow.sdk`: Airflow 3's authoring interface."""

from ledger.dag import DAG, TaskGroup, task
from ledger.params import Param
from ledger.secrets import Variable

__all__ = ["DAG", "Param", "TaskGroup", "Variable", "task"]
