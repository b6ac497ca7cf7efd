"""`airflow.timetables.interval`."""

from ledger.sdk.timetables import CronDataIntervalTimetable, DeltaDataIntervalTimetable

__all__ = ["CronDataIntervalTimetable", "DeltaDataIntervalTimetable"]
