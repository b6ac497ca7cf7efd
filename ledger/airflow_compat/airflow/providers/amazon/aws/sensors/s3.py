"""`airflow.providers.amazon.aws.sensors.s3` (ledger/airflow_compat/s3.py)."""

from ledger.airflow_compat.s3 import S3KeySensor

__all__ = ["S3KeySensor"]
