"""`airflow.exceptions`."""

from ledger.errors import FailWithoutRetry as AirflowFailException
from ledger.errors import SensorTimeout as AirflowSensorTimeout
from ledger.errors import SkipTask as AirflowSkipException

__all__ = ["AirflowFailException", "AirflowSensorTimeout", "AirflowSkipException"]
