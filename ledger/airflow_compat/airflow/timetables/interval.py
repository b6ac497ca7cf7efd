"""`airflow.timetables.interval`."""

from ledger.timetables import CronDataIntervalTimetable, DeltaDataIntervalTimetable

__all__ = ["CronDataIntervalTimetable", "DeltaDataIntervalTimetable"]
