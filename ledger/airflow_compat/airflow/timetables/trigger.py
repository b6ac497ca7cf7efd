"""`airflow.timetables.trigger`."""

from ledger.sdk.timetables import CronTriggerTimetable, DeltaTriggerTimetable, MultipleCronTriggerTimetable

__all__ = ["CronTriggerTimetable", "DeltaTriggerTimetable", "MultipleCronTriggerTimetable"]
