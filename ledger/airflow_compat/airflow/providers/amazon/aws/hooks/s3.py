"""`airflow.providers.amazon.aws.hooks.s3` (ledger/airflow_compat/s3.py)."""

from ledger.airflow_compat.s3 import S3Hook

__all__ = ["S3Hook"]
