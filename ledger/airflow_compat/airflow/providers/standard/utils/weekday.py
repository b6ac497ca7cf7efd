"""`airflow.providers.standard.utils.weekday`."""

from ledger.airflow_compat.graph import WeekDay

__all__ = ["WeekDay"]
