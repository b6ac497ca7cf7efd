"""`airflow.providers.standard.operators.weekday`."""

from ledger.branching import BranchDayOfWeekTask as BranchDayOfWeekOperator

__all__ = ["BranchDayOfWeekOperator"]
