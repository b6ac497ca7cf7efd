"""A custom timetable written for Airflow (its module on the scheduler's PYTHONPATH, as Airflow's plugins folder):
one run per workday, over [day 00:00, next day 00:00), due at the end of the day."""
from datetime import timedelta

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable
from pendulum import UTC, DateTime, Time


class WorkdayTimetable(Timetable):
    def __init__(self, skip_fridays: bool = False) -> None:
        self.skip_fridays = skip_fridays

    def serialize(self):
        return {"skip_fridays": self.skip_fridays}

    @classmethod
    def deserialize(cls, data):
        return cls(data["skip_fridays"])

    @property
    def summary(self):
        return "workdays" + (" but Fridays" if self.skip_fridays else "")

    def _workday(self, day: DateTime) -> DateTime:
        while day.weekday() >= (4 if self.skip_fridays else 5):
            day = day + timedelta(days=1)
        return day

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        start = DateTime.combine(run_after.date(), Time.min).replace(tzinfo=UTC)
        return DataInterval(start=start, end=start + timedelta(days=1))

    def next_dagrun_info(self, *, last_automated_data_interval, restriction: TimeRestriction):
        if last_automated_data_interval is not None:
            start = last_automated_data_interval.start + timedelta(days=1)
        else:
            start = DateTime.combine(restriction.earliest.date(), Time.min).replace(tzinfo=UTC)
            if start < restriction.earliest:
                start = start + timedelta(days=1)
        start = self._workday(start)
        if restriction.latest is not None and start > restriction.latest:
            return None
        return DagRunInfo.interval(start=start, end=start + timedelta(days=1))
