"""`airflow.sdk`."""

from ledger import airflow_compat
from ledger.airflow_compat.assets import AirflowAsset as Asset
from ledger.airflow_compat.assets import AssetAccessControl, asset
from ledger.airflow_compat.dag import SdkDAG as DAG
from ledger.airflow_compat.dag import sdk_dag as dag
from ledger.airflow_compat.decorators import setup, task, task_group, teardown
from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.airflow_compat.graph import (
    TriggerRule,
    chain,
    chain_linear,
    cross_downstream,
    get_parsing_context,
)
from ledger.airflow_compat.operators import (
    AirflowContext as Context,
)
from ledger.airflow_compat.operators import BaseOperator, TaskGroup, get_current_context
from ledger.airflow_compat.operators import (
    xcom_arg as XComArg,
)
from ledger.airflow_compat.retry_policy import (
    ExceptionRetryPolicy,
    RetryAction,
    RetryDecision,
    RetryPolicy,
    RetryRule,
)
from ledger.sdk.branching import WeekDay
from ledger.sdk.dag import Label
from ledger.sdk.datasets import AssetAlias, AssetAll, AssetAny, AssetOrTimeSchedule, Metadata
from ledger.sdk.object_storage import ObjectStoragePath
from ledger.sdk.params import Param, ParamsDict
from ledger.sdk.secrets import Variable
from ledger.sdk.sensors import PokeReturnValue
from ledger.sdk.timetables import (
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DeltaDataIntervalTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
)

__all__ = [
    "DAG",
    "Asset",
    "AssetAccessControl",
    "AssetAlias",
    "AssetAll",
    "AssetAny",
    "AssetOrTimeSchedule",
    "BaseOperator",
    "BaseSensorOperator",
    "Context",
    "CronDataIntervalTimetable",
    "CronTriggerTimetable",
    "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable",
    "EventsTimetable",
    "ExceptionRetryPolicy",
    "Label",
    "Metadata",
    "MultipleCronTriggerTimetable",
    "ObjectStoragePath",
    "Param",
    "ParamsDict",
    "PokeReturnValue",
    "RetryAction",
    "RetryDecision",
    "RetryPolicy",
    "RetryRule",
    "TaskGroup",
    "TriggerRule",
    "Variable",
    "WeekDay",
    "XComArg",
    "asset",
    "chain",
    "chain_linear",
    "cross_downstream",
    "dag",
    "get_current_context",
    "get_parsing_context",
    "setup",
    "task",
    "task_group",
    "teardown",
]

__getattr__ = airflow_compat.refused_names(__name__)  # `from airflow.sdk import AsyncCallback`: decision 0283
