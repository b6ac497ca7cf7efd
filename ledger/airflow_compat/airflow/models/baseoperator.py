"""`airflow.models.baseoperator`."""

from ledger.airflow_compat.graph import chain, chain_linear, cross_downstream
from ledger.airflow_compat.operators import BaseOperator

__all__ = ["BaseOperator", "chain", "chain_linear", "cross_downstream"]
