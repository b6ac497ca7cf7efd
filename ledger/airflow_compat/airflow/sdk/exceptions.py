"""`airflow.sdk.exceptions` (Airflow 3's task SDK)."""

from ledger.airflow_compat.graph import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    AirflowTaskTimeout,
    DuplicateTaskIdFound,
    ParamValidationError,
    TaskDeferred,
)

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "DuplicateTaskIdFound",
    "ParamValidationError",
    "TaskDeferred",
]
