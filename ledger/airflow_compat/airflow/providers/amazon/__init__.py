"""`airflow.providers.amazon`: its S3 basics (ledger/airflow_compat/s3.py); boto3 from `ledger[s3]`."""
