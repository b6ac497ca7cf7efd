"""`airflow.providers.standard.utils.weekday`."""

from ledger.branching import WeekDay

__all__ = ["WeekDay"]
