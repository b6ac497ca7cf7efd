"""`airflow.operators.trigger_dagrun`."""

from ledger.airflow_compat.trigger import TriggerDagRunOperator

__all__ = ["TriggerDagRunOperator"]
