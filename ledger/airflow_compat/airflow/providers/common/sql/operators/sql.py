"""`airflow.providers.common.sql.operators.sql` (ledger/airflow_compat/sql.py)."""

from ledger.airflow_compat.sql import SQLExecuteQueryOperator

__all__ = ["SQLExecuteQueryOperator"]
