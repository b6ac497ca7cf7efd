"""`airflow.exceptions`."""

from ledger.errors import SkipTask as AirflowSkipException

__all__ = ["AirflowSkipException"]
