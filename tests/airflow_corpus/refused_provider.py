"""An import ledger does not provide: refused at parse time, in `ledger dags errors`."""

from airflow import DAG
from airflow.providers.amazon.aws.operators.s3 import S3CreateBucketOperator

with DAG("refused_provider", schedule=None):
    S3CreateBucketOperator(task_id="bucket", bucket_name="b")
