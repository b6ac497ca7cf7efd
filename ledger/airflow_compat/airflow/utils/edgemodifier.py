"""`airflow.utils.edgemodifier`."""

from ledger.sdk.dag import Label

__all__ = ["Label"]
