"""`airflow.providers.common.compat.sdk`: the task SDK's names, wherever the running Airflow keeps them (what the
standard provider's example DAGs import)."""

from ledger.airflow_compat.airflow.utils import timezone
from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.airflow_compat.graph import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    TriggerRule,
    chain,
)
from ledger.airflow_compat.operators import AirflowContext as Context
from ledger.airflow_compat.operators import BaseOperator, get_current_context
from ledger.sdk.params import Param
from ledger.sdk.secrets import Variable

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowSkipException",
    "BaseOperator",
    "BaseSensorOperator",
    "Context",
    "Param",
    "TriggerRule",
    "Variable",
    "chain",
    "get_current_context",
    "timezone",
]
