"""`airflow.models.param`."""

from ledger.params import Param

__all__ = ["Param"]
