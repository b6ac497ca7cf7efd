"""`airflow.datasets`."""

from ledger.sdk.datasets import Dataset, DatasetAlias, DatasetAll, DatasetAny

__all__ = ["Dataset", "DatasetAlias", "DatasetAll", "DatasetAny"]
