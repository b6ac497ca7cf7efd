"""`airflow.timetables.events`."""

from ledger.timetables import EventsTimetable

__all__ = ["EventsTimetable"]
