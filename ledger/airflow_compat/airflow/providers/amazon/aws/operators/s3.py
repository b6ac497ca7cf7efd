"""`airflow.providers.amazon.aws.operators.s3` (ledger/airflow_compat/s3.py)."""

from ledger.airflow_compat.s3 import S3CreateObjectOperator, S3DeleteObjectsOperator

__all__ = ["S3CreateObjectOperator", "S3DeleteObjectsOperator"]
