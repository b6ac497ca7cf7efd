"""`airflow.sdk`: Airflow 3's authoring interface."""

from ledger.dag import DAG, TaskGroup, task
from ledger.params import Param
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
    "DAG", "CronDataIntervalTimetable", "CronTriggerTimetable", "DeltaDataIntervalTimetable", "DeltaTriggerTimetable",
    "EventsTimetable", "MultipleCronTriggerTimetable", "Param", "TaskGroup", "Variable", "task",
]  # fmt: skip
