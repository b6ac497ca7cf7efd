"""`airflow.exceptions`."""

from ledger.airflow_compat.graph import (
    AirflowBadRequest,
    AirflowConfigException,
    AirflowException,
    AirflowFailException,
    AirflowNotFoundException,
    AirflowSensorTimeout,
    AirflowSkipException,
    AirflowTaskTimeout,
    DagRunAlreadyExists,
    DuplicateTaskIdFound,
    ParamValidationError,
    TaskDeferred,
)

__all__ = [
    "AirflowBadRequest",
    "AirflowConfigException",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "DagRunAlreadyExists",
    "DuplicateTaskIdFound",
    "ParamValidationError",
    "TaskDeferred",
]
