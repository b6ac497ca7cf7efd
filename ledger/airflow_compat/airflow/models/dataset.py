"""`airflow.models.dataset`: the dataset classes DAG files name (an event, for type hints, is what a try reads of
an inlet: ledger.sdk.datasets.InletEvent). Airflow's database models of datasets are not provided."""

from ledger.sdk.datasets import Dataset, DatasetAlias
from ledger.sdk.datasets import InletEvent as DatasetEvent

__all__ = ["Dataset", "DatasetAlias", "DatasetEvent"]
