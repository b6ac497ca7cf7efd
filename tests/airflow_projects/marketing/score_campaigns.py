from airflow.providers.amazon.aws.sensors.s3 import S3KeySensor
from airflow.sdk import dag, task
from include.paths import CAMPAIGNS, LAKE, START


@dag(start_date=START, schedule=CAMPAIGNS, catchup=False)
def score_campaigns():
    ready = S3KeySensor(task_id="ready", aws_conn_id="lake", bucket_name="lake", bucket_key="campaigns/*.csv",
                        wildcard_match=True, poke_interval=1, timeout=60)

    @task
    def score():
        files = sorted(LAKE.iterdir(), key=lambda p: p.name)
        return {p.name: p.read_text().splitlines()[1] for p in files}

    ready >> score()


score_campaigns()
