"""`airflow.models`."""

from ledger.dag import DAG
from ledger.params import Param
from ledger.secrets import Variable

__all__ = ["DAG", "Param", "Variable"]
