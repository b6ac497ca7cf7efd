"""`airflow.providers.smtp.hooks.smtp` (ledger/airflow_compat/smtp.py)."""

from ledger.airflow_compat.smtp import SmtpHook

__all__ = ["SmtpHook"]
