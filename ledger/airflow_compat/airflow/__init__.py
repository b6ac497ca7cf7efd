"""ledger's `airflow` namespace (ledger/airflow_compat/__init__.py): `from airflow import DAG` in a DAG file
run by ledger gives ledger's DAG, with Airflow 2's defaults."""

from ledger.airflow_compat.dag import DAG
from ledger.airflow_compat.operators import xcom_arg as XComArg
from ledger.sdk.datasets import Dataset

__ledger_airflow_compat__ = True  # the finder knows its own namespace by this
__version__ = "2.10.5"  # the Airflow whose DAG files this namespace reads (3.x files read through airflow.sdk)

__all__ = ["DAG", "Dataset", "XComArg"]
