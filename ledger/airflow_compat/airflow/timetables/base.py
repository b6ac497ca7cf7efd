"""`airflow.timetables.base`: the Timetable protocol (custom timetables subclass Timetable)."""

from ledger.sdk.timetables import DagRunInfo, DataInterval, TimeRestriction, Timetable

__all__ = ["DagRunInfo", "DataInterval", "TimeRestriction", "Timetable"]
