"""`airflow.providers`: of the providers, ledger has the standard one (`airflow.providers.standard`), SMTP's operator,
the SQL ones (`common.sql`, `sqlite`, `postgres`: ledger/airflow_compat/sql.py) and HTTP's
(ledger/airflow_compat/http.py)."""
