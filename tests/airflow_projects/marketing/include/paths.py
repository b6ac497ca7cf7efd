"""Where the marketing DAGs keep their data."""

import pendulum
from airflow.sdk import Asset, ObjectStoragePath

START = pendulum.datetime(2024, 3, 1, tz="UTC")
CAMPAIGNS = Asset("campaigns", uri="s3://lake/campaigns/")
LAKE = ObjectStoragePath("s3://lake@lake/campaigns/")
