"""`airflow.providers.standard.utils.weekday`."""

from ledger.sdk.branching import WeekDay

__all__ = ["WeekDay"]
