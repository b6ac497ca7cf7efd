"""`airflow.utils.edgemodifier`."""

from ledger.dag import Label

__all__ = ["Label"]
