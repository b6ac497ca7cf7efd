"""`airflow.utils.state`."""

from ledger.airflow_compat.graph import DagRunState, State, TaskInstanceState

__all__ = ["DagRunState", "State", "TaskInstanceState"]
