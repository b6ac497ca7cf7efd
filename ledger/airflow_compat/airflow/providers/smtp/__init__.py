"""`airflow.providers.smtp`: e-mail through ledger's SMTP settings."""
