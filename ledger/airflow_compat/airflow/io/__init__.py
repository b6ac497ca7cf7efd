"""`airflow.io`: object storage through fsspec (ledger/sdk/object_storage.py)."""
