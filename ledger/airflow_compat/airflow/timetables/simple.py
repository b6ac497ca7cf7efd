"""`airflow.timetables.simple`."""

from ledger.timetables import NullTimetable, OnceTimetable

__all__ = ["NullTimetable", "OnceTimetable"]
