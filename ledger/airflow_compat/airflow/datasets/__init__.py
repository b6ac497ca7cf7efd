"""`airflow.datasets`."""

from ledger.sdk.datasets import Dataset, DatasetAlias, DatasetAll, DatasetAny, Metadata

__all__ = ["Dataset", "DatasetAlias", "DatasetAll", "DatasetAny", "Metadata"]
