"""`airflow.models.param`."""

from ledger.sdk.params import Param, ParamsDict

__all__ = ["Param", "ParamsDict"]
