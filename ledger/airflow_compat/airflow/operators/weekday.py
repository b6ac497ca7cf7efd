"""`airflow.operators.weekday`."""

from ledger.airflow_compat.flow import BranchDayOfWeekOperator

__all__ = ["BranchDayOfWeekOperator"]
