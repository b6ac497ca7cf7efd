from airflow.providers.amazon.aws.operators.s3 import S3CreateObjectOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG
from include.paths import CAMPAIGNS, START

with DAG("export_campaigns", start_date=START, end_date=START, schedule="@daily", catchup=True,
         params={"campaigns": 3}):
    count = BashOperator(task_id="count", bash_command="scripts/count.sh")
    export = S3CreateObjectOperator(task_id="export", aws_conn_id="lake", s3_bucket="lake",
                                    s3_key="campaigns/{{ ds }}.csv",
                                    data="campaign,clicks\nspring,{{ params.campaigns }}\n", replace=True,
                                    outlets=[CAMPAIGNS])
    count >> export
