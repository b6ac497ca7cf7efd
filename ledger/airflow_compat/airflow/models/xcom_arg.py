"""`airflow.models.xcom_arg`."""

from ledger.airflow_compat.operators import xcom_arg as XComArg

__all__ = ["XComArg"]
