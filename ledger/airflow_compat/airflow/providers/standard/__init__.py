"""`airflow.providers.standard`: Airflow 3's home of the core operators."""
