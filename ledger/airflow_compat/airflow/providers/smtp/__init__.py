"""`airflow.providers.smtp`: e-mail through an SMTP connection, or ledger's SMTP settings
(ledger/airflow_compat/smtp.py)."""
