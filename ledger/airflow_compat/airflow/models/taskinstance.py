"""`airflow.models.taskinstance`: a try's `ti` is ledger's task context."""

from ledger.sdk.context import TaskContext as TaskInstance

__all__ = ["TaskInstance"]
