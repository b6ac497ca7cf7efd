"""`airflow.timetables.events`."""

from ledger.sdk.timetables import EventsTimetable

__all__ = ["EventsTimetable"]
