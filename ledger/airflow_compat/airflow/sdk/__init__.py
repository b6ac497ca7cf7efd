"""`airflow.sdk`."""

from ledger.airflow_compat.dag import SdkDAG as DAG
from ledger.airflow_compat.dag import sdk_dag as dag
from ledger.airflow_compat.decorators import task, task_group
from ledger.airflow_compat.graph import TriggerRule, WeekDay, chain, chain_linear, cross_downstream
from ledger.airflow_compat.operators import (
    AirflowContext as Context,
)
from ledger.airflow_compat.operators import (
    BaseOperator,
    get_current_context,
)
from ledger.airflow_compat.operators import (
    xcom_arg as XComArg,
)
from ledger.dag import Label, TaskGroup
from ledger.params import Param, ParamsDict
from ledger.secrets import Variable
from ledger.timetables import (
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DeltaDataIntervalTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
)

__all__ = [
    "DAG",
    "BaseOperator",
    "Context",
    "CronDataIntervalTimetable",
    "CronTriggerTimetable",
    "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable",
    "EventsTimetable",
    "Label",
    "MultipleCronTriggerTimetable",
    "Param",
    "ParamsDict",
    "TaskGroup",
    "TriggerRule",
    "Variable",
    "WeekDay",
    "XComArg",
    "chain",
    "chain_linear",
    "cross_downstream",
    "dag",
    "get_current_context",
    "task",
    "task_group",
]
