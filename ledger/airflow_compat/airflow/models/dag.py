"""`airflow.models.dag`."""

from ledger.airflow_compat.dag import DAG

__all__ = ["DAG"]
