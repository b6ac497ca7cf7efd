"""`airflow.configuration`: `conf` (ledger/airflow_compat/config.py)."""

from ledger.airflow_compat.config import AirflowConf, conf

__all__ = ["AirflowConf", "conf"]
