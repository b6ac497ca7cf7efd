"""Timetables (Airflow's trigger timetables, events, custom timetables) as ledger schedules: pure maths, no database."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pendulum import DateTime

from ledger.core.schedule import DataInterval, ScheduleError, due_intervals, next_scheduled
from ledger.sdk.timetables import (
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DagRunInfo,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
    TimeRestriction,
    Timetable,
    TimetableSchedule,
    from_description,
    read_schedule,
    to_schedule,
)
from ledger.sdk.timetables import DataInterval as AfInterval
from tests.conftest import examples

BERLIN = "Europe/Berlin"


def U(*args: int) -> DateTime:
    return pendulum.datetime(*args, tz="UTC")


def B(*args: int) -> DateTime:
    return pendulum.datetime(*args, tz=BERLIN)


def exact(at: DateTime) -> DataInterval:
    return DataInterval(at, at)


def walk(value: Any, start: DateTime, n: int, *, end: DateTime | None = None, tz: str = "UTC") -> list[DataInterval]:
    schedule = to_schedule(value, timezone=tz, start_date=start)
    return next_scheduled(schedule, start_date=start, end_date=end, after=None, now=start, catchup=True, n=n)


def test_a_cron_trigger_runs_at_each_tick_over_an_instant() -> None:
    got = walk(CronTriggerTimetable("0 6 * * *", timezone="UTC"), U(2024, 1, 1, 7), 3)
    assert got == [exact(U(2024, 1, 2, 6)), exact(U(2024, 1, 3, 6)), exact(U(2024, 1, 4, 6))]


def test_a_daily_cron_trigger_in_berlin_follows_the_wall_clock_across_both_dst_changes() -> None:
    # 2024-03-31 02:00 does not exist in Berlin (moved forward to 03:00 CEST); 2024-10-27 02:00 happens twice
    # (the second one, standard time, counts), as for cron data intervals and in Airflow
    spring = walk(CronTriggerTimetable("0 2 * * *", timezone=BERLIN), B(2024, 3, 30), 3)
    assert [i.end for i in spring] == [U(2024, 3, 30, 1), U(2024, 3, 31, 1), U(2024, 4, 1, 0)]
    autumn = walk(CronTriggerTimetable("0 2 * * *", timezone=BERLIN), B(2024, 10, 26), 3)
    assert [i.end for i in autumn] == [U(2024, 10, 26, 0), U(2024, 10, 27, 1), U(2024, 10, 28, 1)]


@pytest.mark.parametrize(("day", "hours"), [((2024, 3, 31), 23), ((2024, 10, 27), 25), ((2024, 6, 1), 24)])
def test_an_hourly_cron_trigger_in_berlin_runs_once_per_real_hour(day: tuple[int, int, int], hours: int) -> None:
    start, end = B(*day), B(*day).add(days=1)
    got = walk(CronTriggerTimetable("0 * * * *", timezone=BERLIN), start, 30, end=end.subtract(microseconds=1))
    assert len(got) == hours
    assert all(b.end - a.end == dt.timedelta(hours=1) for a, b in zip(got, got[1:], strict=False))


def test_with_an_interval_the_logical_date_is_the_interval_start_and_the_run_is_due_at_the_trigger() -> None:
    timetable = CronTriggerTimetable("0 6 * * *", timezone="UTC", interval=dt.timedelta(hours=6))
    schedule = to_schedule(timetable, timezone="UTC", start_date=U(2024, 1, 1))
    assert walk(timetable, U(2024, 1, 1), 2) == [DataInterval(U(2024, 1, 1), U(2024, 1, 1, 6)),
                                                 DataInterval(U(2024, 1, 2), U(2024, 1, 2, 6))]
    due = due_intervals(schedule, start_date=U(2024, 1, 1), end_date=None, after=None, now=U(2024, 1, 2, 5, 59),
                        catchup=True)
    assert [i.logical_date for i in due] == [U(2024, 1, 1)]
    # a manual run at a scheduled logical date covers the interval the scheduled run there has
    assert schedule.interval_for(U(2024, 1, 2)) == DataInterval(U(2024, 1, 2), U(2024, 1, 2, 6))
    assert schedule.is_tick(U(2024, 1, 2)) and not schedule.is_tick(U(2024, 1, 2, 6))


def test_a_zero_length_interval_is_not_created_twice_and_the_next_is_strictly_after_it() -> None:
    schedule = to_schedule(CronTriggerTimetable("0 6 * * *", timezone="UTC"), timezone="UTC", start_date=U(2024, 1, 1))
    last = exact(U(2024, 1, 1, 6))
    assert schedule.next_interval(after=last, start_date=U(2024, 1, 1), end_date=None) == exact(U(2024, 1, 2, 6))
    assert schedule.next_interval(after=last.end, start_date=U(2024, 1, 1), end_date=None) == exact(U(2024, 1, 2, 6))


def test_without_catchup_only_the_latest_trigger_due_is_created_then_the_following_ones() -> None:
    schedule = to_schedule(CronTriggerTimetable("0 */6 * * *", timezone="UTC"), timezone="UTC",
                           start_date=U(2024, 1, 1))
    got = next_scheduled(schedule, start_date=U(2024, 1, 1), end_date=None, after=None, now=U(2024, 1, 9, 13),
                         catchup=False, n=3)
    assert [i.end for i in got] == [U(2024, 1, 9, 12), U(2024, 1, 9, 18), U(2024, 1, 10)]


def test_no_trigger_time_is_after_end_date() -> None:
    got = walk(CronTriggerTimetable("@daily", timezone="UTC"), U(2024, 1, 1), 10, end=U(2024, 1, 3))
    assert [i.end for i in got] == [U(2024, 1, 1), U(2024, 1, 2), U(2024, 1, 3)]


def test_multiple_crons_trigger_at_the_union_of_their_ticks_once_per_instant() -> None:
    timetable = MultipleCronTriggerTimetable("0 6 * * *", "0 6,18 * * *", "30 12 * * 1", timezone="UTC")
    got = walk(timetable, U(2024, 1, 1), 5)  # 2024-01-01 is a Monday
    assert [i.end for i in got] == [U(2024, 1, 1, 6), U(2024, 1, 1, 12, 30), U(2024, 1, 1, 18), U(2024, 1, 2, 6),
                                    U(2024, 1, 2, 18)]
    assert to_schedule(timetable, timezone="UTC", start_date=None).summary() == \
        "trigger 0 6 * * *, 0 6,18 * * *, 30 12 * * 1"


def test_a_delta_trigger_steps_from_the_start_date() -> None:
    got = walk(DeltaTriggerTimetable(dt.timedelta(hours=8), interval=dt.timedelta(hours=1)), U(2024, 1, 1, 3), 3)
    assert got == [DataInterval(U(2024, 1, 1, 2), U(2024, 1, 1, 3)), DataInterval(U(2024, 1, 1, 10), U(2024, 1, 1, 11)),
                   DataInterval(U(2024, 1, 1, 18), U(2024, 1, 1, 19))]


def test_events_run_at_each_listed_instant_sorted_once_each_and_end() -> None:
    timetable = EventsTimetable([U(2024, 5, 1, 18), pendulum.datetime(2024, 3, 1, 18), U(2024, 5, 1, 18),
                                 dt.datetime(2024, 4, 1, 18)])  # naive: read as UTC
    assert walk(timetable, U(2024, 1, 1), 10) == [exact(U(2024, 3, 1, 18)), exact(U(2024, 4, 1, 18)),
                                                  exact(U(2024, 5, 1, 18))]
    assert walk(timetable, U(2024, 3, 15), 10) == [exact(U(2024, 4, 1, 18)), exact(U(2024, 5, 1, 18))]
    assert to_schedule(timetable, timezone="UTC", start_date=None).summary() == "3 events"


def test_a_manual_run_of_events_restricted_to_events_takes_the_latest_event() -> None:
    free = to_schedule(EventsTimetable([U(2024, 3, 1)]), timezone="UTC", start_date=None)
    restricted = to_schedule(EventsTimetable([U(2024, 3, 1), U(2024, 4, 1)], restrict_to_events=True),
                             timezone="UTC", start_date=None)
    assert free.interval_for(U(2024, 3, 20)) == exact(U(2024, 3, 20))
    assert restricted.interval_for(U(2024, 3, 20)) == exact(U(2024, 3, 1))
    assert restricted.interval_for(U(2024, 1, 1)) == exact(U(2024, 3, 1))


@pytest.mark.parametrize("timetable", [
    CronTriggerTimetable("0 2 * * *", timezone=BERLIN, interval=dt.timedelta(hours=2), run_immediately=True),
    MultipleCronTriggerTimetable("0 6 * * *", "0 18 * * 5", timezone="UTC"),
    DeltaTriggerTimetable(dt.timedelta(hours=8)),
    EventsTimetable([U(2024, 3, 1), U(2024, 4, 1)], restrict_to_events=True, description="matches"),
    CronDataIntervalTimetable("0 6 * * *", timezone=BERLIN),
], ids=["cron", "multiple", "delta", "events", "cron-data-interval"])
def test_a_version_records_the_timetable_and_rebuilds_the_same_schedule(timetable: Timetable) -> None:
    start = U(2024, 1, 1)
    schedule = to_schedule(timetable, timezone=BERLIN, start_date=start)
    text = json.dumps(schedule.describe())
    rebuilt = read_schedule(json.loads(text), timezone=BERLIN, start_date=start)
    assert rebuilt.describe() == schedule.describe()
    assert next_scheduled(rebuilt, start_date=start, end_date=None, after=None, now=U(2024, 4, 2), catchup=True,
                          n=20) == next_scheduled(schedule, start_date=start, end_date=None, after=None,
                                                  now=U(2024, 4, 2), catchup=True, n=20)


def test_an_airflow_timetable_answers_airflows_protocol() -> None:
    timetable = CronTriggerTimetable("0 6 * * *", timezone="UTC", interval=dt.timedelta(hours=1))
    info = timetable.next_dagrun_info(last_automated_data_interval=AfInterval(U(2024, 1, 1, 5), U(2024, 1, 1, 6)),
                                      restriction=TimeRestriction(U(2024, 1, 1), None, True))
    assert info == DagRunInfo.interval(U(2024, 1, 2, 5), U(2024, 1, 2, 6))
    assert info is not None and info.run_after == U(2024, 1, 2, 6) and info.logical_date == U(2024, 1, 2, 5)


# -- a custom timetable ------------------------------------------------------------------------------------


class WorkdayTimetable(Timetable):
    """A run per workday over [day 00:00, next day 00:00), due at the next day's midnight; reads the last
    interval's *start* (like Airflow's AfterWorkdayTimetable example); `hour` shifts the day (serialized)."""

    def __init__(self, hour: int = 0) -> None:
        self.hour = hour

    def serialize(self) -> dict[str, Any]:
        return {"hour": self.hour}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(data["hour"])

    @property
    def summary(self) -> str:
        return f"workdays at {self.hour:02d}:00"

    def _day(self, start: DateTime) -> DataInterval:
        return DataInterval(start, start.add(days=1))

    def infer_manual_data_interval(self, *, run_after: DateTime) -> AfInterval:
        start = run_after.start_of("day").add(hours=self.hour)
        while start.weekday() >= 5:
            start = start.subtract(days=1)
        return AfInterval(start, start.add(days=1))

    def next_dagrun_info(self, *, last_automated_data_interval: AfInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        if last_automated_data_interval is not None:
            start = last_automated_data_interval.start.add(days=1)
        else:
            assert restriction.earliest is not None
            start = restriction.earliest.start_of("day").add(hours=self.hour)
            if start < restriction.earliest:
                start = start.add(days=1)
        while start.weekday() >= 5:
            start = start.add(days=1)
        if restriction.latest is not None and start > restriction.latest:
            return None
        return DagRunInfo.interval(start, start.add(days=1))


def test_a_custom_timetable_plans_through_its_next_dagrun_info_from_the_last_runs_interval() -> None:
    start = U(2024, 1, 5)  # a Friday
    got = walk(WorkdayTimetable(hour=2), start, 3)
    assert [i.start for i in got] == [U(2024, 1, 5, 2), U(2024, 1, 8, 2), U(2024, 1, 9, 2)]
    schedule = to_schedule(WorkdayTimetable(hour=2), timezone="UTC", start_date=start)
    due = due_intervals(schedule, start_date=start, end_date=None, after=None, now=U(2024, 1, 10, 3), catchup=False)
    assert [i.start for i in due] == [U(2024, 1, 9, 2)]
    assert schedule.interval_for(U(2024, 1, 7, 12)).start == U(2024, 1, 5, 2)
    assert schedule.intervals_between(U(2024, 1, 6), U(2024, 1, 9, 2), start_date=start, end_date=None) == \
        [DataInterval(U(2024, 1, 8, 2), U(2024, 1, 9, 2)), DataInterval(U(2024, 1, 9, 2), U(2024, 1, 10, 2))]
    assert schedule.summary() == "workdays at 02:00"


def test_a_custom_timetable_is_recorded_by_class_and_data_and_rebuilt_by_deserialize() -> None:
    schedule = to_schedule(WorkdayTimetable(hour=3), timezone="UTC", start_date=U(2024, 1, 1))
    desc = schedule.describe()
    assert desc == {"type": "timetable", "class": f"{__name__}.WorkdayTimetable", "data": {"hour": 3}}
    rebuilt = from_description(json.loads(json.dumps(desc)), timezone="UTC", start_date=U(2024, 1, 1))
    assert isinstance(rebuilt, TimetableSchedule)
    first = rebuilt.next_interval(after=None, start_date=U(2024, 1, 1), end_date=None)
    assert first == DataInterval(U(2024, 1, 1, 3), U(2024, 1, 2, 3))


def test_a_timetable_class_that_cannot_be_imported_fails_with_a_line_naming_it() -> None:
    rebuilt = from_description({"type": "timetable", "class": "nowhere_module.Gone", "data": {}}, timezone="UTC",
                               start_date=U(2024, 1, 1))
    assert rebuilt is not None
    with pytest.raises(ScheduleError, match=r"nowhere_module\.Gone cannot be imported"):
        rebuilt.next_interval(after=None, start_date=U(2024, 1, 1), end_date=None)


class Stuck(WorkdayTimetable):
    def next_dagrun_info(self, *, last_automated_data_interval: AfInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        return DagRunInfo.interval(U(2024, 1, 1), U(2024, 1, 2))


class Broken(WorkdayTimetable):
    def next_dagrun_info(self, *, last_automated_data_interval: AfInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        raise KeyError("boom")


def test_a_custom_timetable_that_does_not_move_forward_or_raises_is_a_schedule_error() -> None:
    stuck = to_schedule(Stuck(), timezone="UTC", start_date=U(2024, 1, 1))
    with pytest.raises(ScheduleError, match="does not move forward"):
        walk(Stuck(), U(2024, 1, 1), 3)
    assert stuck.next_interval(after=None, start_date=U(2024, 1, 1), end_date=None) is not None
    with pytest.raises(ScheduleError, match=r"next_dagrun_info\(\) failed: KeyError"):
        walk(Broken(), U(2024, 1, 1), 1)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: CronTriggerTimetable("0 6 * *", timezone="UTC"), "expected 5 fields"),
    (lambda: CronTriggerTimetable("0 6 * * *", timezone="Mars/Olympus"), "unknown timezone"),
    (lambda: CronTriggerTimetable("0 6 * * *", timezone="UTC", interval=dt.timedelta(hours=-1)), "negative"),
    (lambda: DeltaTriggerTimetable(dt.timedelta(0)), "must be positive"),
    (lambda: MultipleCronTriggerTimetable(timezone="UTC"), "at least one cron"),
])
def test_invalid_timetables_are_refused_with_a_message(make: Any, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        make()


# -- properties: what the scheduler creates, step by step, is what next_scheduled lists ---------------------

TRIGGERS = [
    lambda: CronTriggerTimetable("0 2 * * *", timezone=BERLIN),
    lambda: CronTriggerTimetable("30 * * * *", timezone=BERLIN, interval=dt.timedelta(minutes=90)),
    lambda: MultipleCronTriggerTimetable("0 1 * * *", "0 3 * * *", "15 2 * * 0", timezone=BERLIN),
    lambda: DeltaTriggerTimetable(dt.timedelta(hours=5)),
    lambda: EventsTimetable([U(2024, 3, 30, 22) .add(hours=7 * k) for k in range(20)]),
    lambda: WorkdayTimetable(hour=1),
]


@settings(max_examples=examples(30), deadline=None)
@given(which=st.integers(min_value=0, max_value=len(TRIGGERS) - 1),
       start_minutes=st.integers(min_value=0, max_value=4 * 24 * 60),
       steps=st.lists(st.integers(min_value=1, max_value=20 * 60), min_size=1, max_size=4),
       catchup=st.booleans())
def test_next_scheduled_lists_what_a_scheduler_polling_at_any_times_creates(
    which: int, start_minutes: int, steps: list[int], catchup: bool
) -> None:
    start = B(2024, 3, 28).add(minutes=start_minutes)  # across Berlin's spring-forward night
    schedule = to_schedule(TRIGGERS[which](), timezone=BERLIN, start_date=start)
    now = start
    predicted = next_scheduled(schedule, start_date=start, end_date=None, after=None, now=now, catchup=catchup, n=100)
    created: list[DataInterval] = []
    for step in steps:
        now = now.add(minutes=step)
        after = created[-1] if created else None
        due = next_scheduled(schedule, start_date=start, end_date=None, after=after, now=now, catchup=catchup, n=100)
        created.extend(i for i in due if i.end <= now)
    starts = [i.start for i in created]
    assert starts == sorted(set(starts))  # strictly increasing: nothing created twice
    if catchup:  # polling never skips an interval: what was listed at the start is what got created
        assert created == predicted[: len(created)]


PINNED = '''
from airflow.timetables.base import Timetable


class Every(Timetable):
    summary = "every {days} days"

    @classmethod
    def deserialize(cls, data):
        return cls()
'''


def test_a_pinned_timetable_loads_from_its_versions_copy_and_two_copies_never_meet() -> None:
    desc = {"type": "timetable", "class": "plugins.every.Every", "data": {}, "module_file": "plugins/every.py"}
    schedule = read_schedule(desc, timezone="UTC", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
    assert isinstance(schedule, TimetableSchedule) and schedule.describe() == desc  # the version's hash holds
    with pytest.raises(ScheduleError, match=r"the version's copy of plugins/every\.py was not read"):
        schedule.interval_for(pendulum.datetime(2024, 1, 1, tz="UTC"))
    two, three = (schedule.pinned(PINNED.replace("{days}", n)) for n in ("2", "3"))  # two versions' copies
    assert (two.summary(), three.summary()) == ("every 2 days", "every 3 days")
    broken = schedule.pinned("raise RuntimeError('no')")
    with pytest.raises(ScheduleError, match=r"its pinned module plugins/every\.py fails: RuntimeError: no"):
        broken.interval_for(pendulum.datetime(2024, 1, 1, tz="UTC"))
