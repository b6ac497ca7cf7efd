"""`airflow.datasets.metadata`: `yield Metadata(dataset, extra)` from a task function."""

from ledger.sdk.datasets import Metadata

__all__ = ["Metadata"]
