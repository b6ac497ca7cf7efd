"""`airflow.utils.timezone`."""

from ledger.airflow_compat.graph import datetime, make_aware, utc, utcnow

__all__ = ["datetime", "make_aware", "utc", "utcnow"]
