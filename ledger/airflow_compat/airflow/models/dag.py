"""`airflow.models.dag`."""

from ledger.dag import DAG

__all__ = ["DAG"]
