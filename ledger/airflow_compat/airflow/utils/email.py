"""`airflow.utils.email` (ledger/airflow_compat/smtp.py)."""

from ledger.airflow_compat.smtp import send_email

__all__ = ["send_email"]
