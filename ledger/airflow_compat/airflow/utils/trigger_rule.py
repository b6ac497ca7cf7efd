"""`airflow.utils.trigger_rule`."""

from ledger.airflow_compat.graph import TriggerRule

__all__ = ["TriggerRule"]
