"""`airflow.timetables.simple`."""

from ledger.sdk.timetables import NullTimetable, OnceTimetable

__all__ = ["NullTimetable", "OnceTimetable"]
