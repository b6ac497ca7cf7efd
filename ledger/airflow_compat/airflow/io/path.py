"""`airflow.io.path` (ledger/sdk/object_storage.py)."""

from ledger.sdk.object_storage import ObjectStoragePath

__all__ = ["ObjectStoragePath"]
