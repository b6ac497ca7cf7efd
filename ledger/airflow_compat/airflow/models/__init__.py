"""`airflow.models`."""

from ledger.airflow_compat.dag import DAG
from ledger.airflow_compat.operators import BaseOperator
from ledger.airflow_compat.operators import xcom_arg as XComArg
from ledger.sdk.context import TaskContext as TaskInstance
from ledger.sdk.params import Param, ParamsDict
from ledger.sdk.secrets import Variable

__all__ = ["DAG", "BaseOperator", "Param", "ParamsDict", "TaskInstance", "Variable", "XComArg"]
