"""`airflow.models.param`."""

from ledger.params import Param, ParamsDict

__all__ = ["Param", "ParamsDict"]
