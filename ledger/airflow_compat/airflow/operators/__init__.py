"""`airflow.operators`: the core operators, one module each."""
