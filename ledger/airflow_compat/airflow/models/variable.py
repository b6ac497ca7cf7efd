"""`airflow.models.variable`."""

from ledger.sdk.secrets import Variable

__all__ = ["Variable"]
