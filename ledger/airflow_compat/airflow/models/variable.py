"""`airflow.models.variable`."""

from ledger.secrets import Variable

__all__ = ["Variable"]
