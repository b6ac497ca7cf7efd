"""`airflow.models.variable`."""

from ledger.services.secrets import Variable

__all__ = ["Variable"]
