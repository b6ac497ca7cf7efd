"""`airflow.utils.context`."""

from ledger.airflow_compat.operators import AirflowContext as Context
from ledger.airflow_compat.operators import get_current_context

__all__ = ["Context", "get_current_context"]
