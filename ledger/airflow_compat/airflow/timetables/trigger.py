"""`airflow.timetables.trigger`."""

from ledger.timetables import CronTriggerTimetable, DeltaTriggerTimetable, MultipleCronTriggerTimetable

__all__ = ["CronTriggerTimetable", "DeltaTriggerTimetable", "MultipleCronTriggerTimetable"]
