"""`airflow.providers.apache.spark.decorators`."""
