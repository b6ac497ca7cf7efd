"""`airflow.datasets`."""

from ledger.datasets import Dataset, DatasetAlias, DatasetAll, DatasetAny

__all__ = ["Dataset", "DatasetAlias", "DatasetAll", "DatasetAny"]
