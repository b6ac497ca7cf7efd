"""`airflow.providers`: of the providers, ledger has the standard one (`airflow.providers.standard`)."""
