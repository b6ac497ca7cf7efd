"""Schedule maths: expected values are worked out by hand from Airflow's data-interval timetables."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pendulum
import pytest
from croniter import croniter
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st
from pendulum import DateTime

import ledger.core.schedule as schedule_module
from ledger.core.errors import LedgerError
from ledger.core.schedule import (
    CronSchedule,
    DataInterval,
    DeltaSchedule,
    NoSchedule,
    OnceSchedule,
    Schedule,
    ScheduleError,
    due_intervals,
    parse_schedule,
    upcoming_intervals,
)
from tests.conftest import examples

AMS = "Europe/Amsterdam"
NY = "America/New_York"


def U(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> DateTime:
    return pendulum.datetime(year, month, day, hour, minute, second, tz="UTC")


def iv(start: DateTime, end: DateTime) -> DataInterval:
    return DataInterval(start, end)


def sched(value: Any, tz: str = "UTC", start: DateTime | None = None) -> Schedule:
    return parse_schedule(value, timezone=tz, start_date=start)


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tz", "kind", "describe", "summary"),
    [
        pytest.param("@hourly", "UTC", CronSchedule, {"type": "cron", "expression": "0 * * * *", "timezone": "UTC"},
                     "@hourly", id="hourly"),
        pytest.param("@daily", "UTC", CronSchedule, {"type": "cron", "expression": "0 0 * * *", "timezone": "UTC"},
                     "@daily", id="daily"),
        pytest.param("@midnight", "UTC", CronSchedule,
                     {"type": "cron", "expression": "0 0 * * *", "timezone": "UTC"}, "@midnight", id="midnight"),
        pytest.param("@weekly", "UTC", CronSchedule, {"type": "cron", "expression": "0 0 * * 0", "timezone": "UTC"},
                     "@weekly", id="weekly"),
        pytest.param("@monthly", "UTC", CronSchedule,
                     {"type": "cron", "expression": "0 0 1 * *", "timezone": "UTC"}, "@monthly", id="monthly"),
        pytest.param("@yearly", "UTC", CronSchedule, {"type": "cron", "expression": "0 0 1 1 *", "timezone": "UTC"},
                     "@yearly", id="yearly"),
        pytest.param("@annually", "UTC", CronSchedule,
                     {"type": "cron", "expression": "0 0 1 1 *", "timezone": "UTC"}, "@annually", id="annually"),
        pytest.param("0 0 * * *", "UTC", CronSchedule,
                     {"type": "cron", "expression": "0 0 * * *", "timezone": "UTC"}, "0 0 * * *", id="cron"),
        pytest.param("  30   6 * * 1-5 ", AMS, CronSchedule,
                     {"type": "cron", "expression": "30 6 * * 1-5", "timezone": AMS}, "30 6 * * 1-5",
                     id="cron-whitespace-normalised-with-timezone"),
        pytest.param("@once", "UTC", OnceSchedule, {"type": "once"}, "@once", id="once"),
        pytest.param(None, "UTC", NoSchedule, {"type": "none"}, "None", id="none"),
        pytest.param(timedelta(hours=1), "UTC", DeltaSchedule, {"type": "timedelta", "seconds": 3600},
                     "every 1:00:00", id="timedelta-hour"),
        pytest.param(timedelta(days=1, minutes=30), "UTC", DeltaSchedule, {"type": "timedelta", "seconds": 88200},
                     "every 1 day, 0:30:00", id="timedelta-day-and-a-half-hour"),
        pytest.param(pendulum.duration(hours=6), "UTC", DeltaSchedule, {"type": "timedelta", "seconds": 21600},
                     "every 6:00:00", id="pendulum-duration"),
    ],
)
def test_parse_schedule_builds_the_described_schedule(
    value: Any, tz: str, kind: type, describe: dict[str, object], summary: str
) -> None:
    result = sched(value, tz, U(2024, 1, 1))
    assert isinstance(result, kind)
    assert result.describe() == describe
    assert result.summary() == summary
    assert result.timezone == tz


def test_a_preset_and_its_cron_expression_are_the_same_schedule() -> None:
    assert sched("@daily") == sched("0 0 * * *")
    assert sched("@daily").describe() == sched("0 0 * * *").describe()
    assert sched("@daily", AMS) != sched("@daily")


def test_parse_schedule_returns_a_schedule_instance_unchanged() -> None:
    existing = CronSchedule("0 3 * * *", timezone=AMS)
    assert parse_schedule(existing) is existing


@pytest.mark.parametrize(
    ("value", "tz", "message"),
    [
        pytest.param("61 * * * *", "UTC", "invalid cron expression '61 * * * *': ", id="minute-out-of-range"),
        pytest.param("0 0 * * 8", "UTC", "invalid cron expression '0 0 * * 8'", id="weekday-out-of-range"),
        pytest.param("0 0 0 * *", "UTC", "invalid cron expression '0 0 0 * *'", id="day-zero"),
        pytest.param("* * *", "UTC", "invalid cron expression '* * *': expected 5 fields", id="too-few-fields"),
        pytest.param("0 0 * * * *", "UTC", "invalid cron expression '0 0 * * * *': expected 5 fields",
                     id="six-field-seconds-cron-refused"),
        pytest.param("0 0 1 1 * 2030 x", "UTC", "expected 5 fields", id="seven-fields"),
        pytest.param("every day", "UTC", "invalid cron expression 'every day'", id="prose"),
        pytest.param("", "UTC", "invalid cron expression ''", id="empty"),
        pytest.param("0 0 31 2 *", "UTC", "invalid cron expression '0 0 31 2 *': it never matches", id="feb-31"),
        pytest.param("H 0 * * *", "UTC", "invalid cron expression 'H 0 * * *': hashed", id="hashed"),
        pytest.param("R 0 * * *", "UTC", "invalid cron expression 'R 0 * * *'", id="random"),
        pytest.param("@fortnightly", "UTC", "unknown schedule preset '@fortnightly'", id="unknown-preset"),
        pytest.param("@daily", "Mars/Olympus_Mons", "unknown timezone 'Mars/Olympus_Mons'", id="unknown-timezone"),
        pytest.param(timedelta(0), "UTC", "invalid timedelta schedule 0:00:00", id="zero-timedelta"),
        pytest.param(timedelta(hours=-1), "UTC", "it must be positive", id="negative-timedelta"),
        pytest.param(42, "UTC", "unsupported schedule 42", id="not-a-schedule"),
    ],
)
def test_invalid_schedules_raise_a_schedule_error_naming_the_value(value: Any, tz: str, message: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        sched(value, tz)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, LedgerError)


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ScheduleError, match="timezone-aware"):
        sched("@daily").next_interval(after=None, start_date=pendulum.naive(2024, 1, 1), end_date=None)


def test_the_logical_date_is_the_interval_start() -> None:
    assert iv(U(2024, 1, 1), U(2024, 1, 2)).logical_date == U(2024, 1, 1)
    with pytest.raises(ValueError, match="ends before it starts"):
        iv(U(2024, 1, 2), U(2024, 1, 1))


# -- next_interval ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tz", "after", "start", "end", "expected"),
    [
        pytest.param("@daily", "UTC", None, U(2024, 1, 1), None, iv(U(2024, 1, 1), U(2024, 1, 2)),
                     id="start-date-on-the-tick-is-the-first-logical-date"),
        pytest.param("@daily", "UTC", None, U(2024, 1, 1, 10, 30), None, iv(U(2024, 1, 2), U(2024, 1, 3)),
                     id="daily-start-date-off-the-tick-starts-at-the-next-tick"),
        pytest.param("@hourly", "UTC", None, U(2024, 1, 1, 10, 30), None,
                     iv(U(2024, 1, 1, 11), U(2024, 1, 1, 12)), id="hourly-start-date-off-the-tick"),
        pytest.param("@midnight", "UTC", None, U(2024, 1, 1, 0, 0, 1), None, iv(U(2024, 1, 2), U(2024, 1, 3)),
                     id="one-second-past-the-tick-is-off-the-tick"),
        pytest.param("@weekly", "UTC", None, U(2024, 1, 3), None, iv(U(2024, 1, 7), U(2024, 1, 14)),
                     id="weekly-starts-on-sunday"),
        pytest.param("@monthly", "UTC", None, U(2024, 1, 15), None, iv(U(2024, 2, 1), U(2024, 3, 1)),
                     id="monthly-intervals-follow-the-calendar"),
        pytest.param("@yearly", "UTC", None, U(2024, 3, 1), None, iv(U(2025, 1, 1), U(2026, 1, 1)), id="yearly"),
        pytest.param("30 6 * * 1-5", "UTC", None, U(2024, 1, 5, 7), None,
                     iv(U(2024, 1, 8, 6, 30), U(2024, 1, 9, 6, 30)), id="weekdays-skip-the-weekend"),
        pytest.param("@daily", "UTC", U(2024, 1, 5), U(2024, 1, 1), None, iv(U(2024, 1, 5), U(2024, 1, 6)),
                     id="after-on-a-tick-continues-there"),
        pytest.param("@daily", "UTC", U(2024, 1, 5, 12), U(2024, 1, 1), None, iv(U(2024, 1, 6), U(2024, 1, 7)),
                     id="after-off-the-tick-moves-to-the-next-tick"),
        pytest.param("@daily", "UTC", U(2023, 12, 1), U(2024, 1, 1), None, iv(U(2024, 1, 1), U(2024, 1, 2)),
                     id="after-before-start-date-is-ignored"),
        pytest.param("@daily", "UTC", U(2024, 1, 5), U(2024, 1, 1), U(2024, 1, 5), iv(U(2024, 1, 5), U(2024, 1, 6)),
                     id="end-date-is-inclusive-for-the-logical-date"),
        pytest.param("@daily", "UTC", U(2024, 1, 6), U(2024, 1, 1), U(2024, 1, 5), None, id="past-end-date"),
        pytest.param("@daily", "UTC", U(2024, 1, 5, 12), U(2024, 1, 1), U(2024, 1, 5, 18), None,
                     id="end-date-between-ticks"),
        pytest.param("0 0 * * *", AMS, None, pendulum.datetime(2024, 1, 1, tz=AMS), None,
                     iv(U(2023, 12, 31, 23), U(2024, 1, 1, 23)), id="cron-in-timezone-returns-utc"),
        pytest.param("@daily", AMS, None, U(2024, 1, 1), None, iv(U(2024, 1, 1, 23), U(2024, 1, 2, 23)),
                     id="utc-midnight-is-off-the-amsterdam-tick"),
        pytest.param(timedelta(hours=1), "UTC", None, U(2024, 1, 1, 10, 17), None,
                     iv(U(2024, 1, 1, 10, 17), U(2024, 1, 1, 11, 17)), id="timedelta-starts-at-start-date"),
        pytest.param(timedelta(hours=1), "UTC", U(2024, 1, 1, 12), U(2024, 1, 1, 10, 17), None,
                     iv(U(2024, 1, 1, 12, 17), U(2024, 1, 1, 13, 17)), id="timedelta-is-anchored-at-start-date"),
        pytest.param(timedelta(days=1), "UTC", U(2024, 1, 3, 6), U(2024, 1, 1, 6), U(2024, 1, 3, 6),
                     iv(U(2024, 1, 3, 6), U(2024, 1, 4, 6)), id="timedelta-end-date-inclusive"),
        pytest.param(timedelta(days=1), "UTC", U(2024, 1, 3, 7), U(2024, 1, 1, 6), U(2024, 1, 3, 6), None,
                     id="timedelta-past-end-date"),
        pytest.param("@once", "UTC", None, U(2024, 1, 1, 9), None, iv(U(2024, 1, 1, 9), U(2024, 1, 1, 9)),
                     id="once-is-start-date-with-an-empty-interval"),
        pytest.param("@once", "UTC", U(2024, 1, 1, 9), U(2024, 1, 1, 9), None, None, id="once-already-used"),
        pytest.param("@once", "UTC", None, U(2024, 1, 2), U(2024, 1, 1), None, id="once-after-end-date"),
        pytest.param(None, "UTC", None, U(2024, 1, 1), None, None, id="none-never-schedules"),
    ],
)
def test_next_interval(
    value: Any, tz: str, after: DateTime | None, start: DateTime, end: DateTime | None, expected: DataInterval | None
) -> None:
    result = sched(value, tz, start).next_interval(after=after, start_date=start, end_date=end)
    assert result == expected
    if result is not None:
        assert result.start.timezone_name == "UTC"
        assert result.end.timezone_name == "UTC"


def test_an_unanchored_timedelta_is_anchored_at_the_start_date_it_is_given() -> None:
    every_hour = parse_schedule(timedelta(hours=1))
    result = every_hour.next_interval(after=U(2024, 1, 1, 12), start_date=U(2024, 1, 1, 10, 17), end_date=None)
    assert result == iv(U(2024, 1, 1, 12, 17), U(2024, 1, 1, 13, 17))


@pytest.mark.parametrize(
    ("old_end", "new_value", "new_tz", "expected"),
    [
        pytest.param(U(2024, 1, 2), "@hourly", "UTC", iv(U(2024, 1, 2), U(2024, 1, 2, 1)),
                     id="daily-to-hourly-continues-at-the-old-end"),
        pytest.param(U(2024, 1, 1, 10), "@daily", "UTC", iv(U(2024, 1, 2), U(2024, 1, 3)),
                     id="hourly-to-daily-skips-to-the-next-midnight"),
        pytest.param(U(2024, 1, 1, 10), "*/15 * * * *", "UTC", iv(U(2024, 1, 1, 10), U(2024, 1, 1, 10, 15)),
                     id="hourly-to-quarter-hourly"),
        pytest.param(U(2024, 1, 2), "@daily", AMS, iv(U(2024, 1, 2, 23), U(2024, 1, 3, 23)),
                     id="utc-daily-to-amsterdam-daily-never-goes-back"),
        pytest.param(U(2024, 1, 2), timedelta(hours=12), "UTC", iv(U(2024, 1, 2, 6), U(2024, 1, 2, 18)),
                     id="daily-to-timedelta-on-the-start-date-grid"),
    ],
)
def test_a_schedule_change_continues_from_the_old_runs_interval_end(
    old_end: DateTime, new_value: Any, new_tz: str, expected: DataInterval
) -> None:
    start = U(2024, 1, 1, 6)
    new = sched(new_value, new_tz, start)
    assert new.next_interval(after=old_end, start_date=start, end_date=None) == expected


def test_a_schedule_change_catches_up_on_the_new_schedule() -> None:
    new = sched("0 */6 * * *")
    result = due_intervals(new, start_date=U(2024, 1, 1), end_date=None, after=U(2024, 1, 2), now=U(2024, 1, 2, 13),
                           catchup=True)
    assert result == [iv(U(2024, 1, 2), U(2024, 1, 2, 6)), iv(U(2024, 1, 2, 6), U(2024, 1, 2, 12))]


# -- intervals_between (backfill) ---------------------------------------------------------------


def _days(*days: int) -> list[DataInterval]:
    return [iv(U(2024, 1, d), U(2024, 1, d + 1)) for d in days]


@pytest.mark.parametrize(
    ("value", "earliest", "latest", "start", "end", "expected"),
    [
        pytest.param("@daily", U(2024, 1, 3), U(2024, 1, 5), U(2024, 1, 1), None, _days(3, 4, 5),
                     id="both-ends-inclusive"),
        pytest.param("@daily", U(2024, 1, 3, 6), U(2024, 1, 5), U(2024, 1, 1), None, _days(4, 5),
                     id="earliest-off-the-tick"),
        pytest.param("@daily", U(2024, 1, 3), U(2024, 1, 5, 23), U(2024, 1, 1), None, _days(3, 4, 5),
                     id="latest-off-the-tick"),
        pytest.param("@daily", U(2024, 1, 3), U(2024, 1, 5), U(2024, 1, 4, 12), None, _days(5),
                     id="clamped-to-start-date"),
        pytest.param("@daily", U(2024, 1, 3), U(2024, 1, 5), U(2024, 1, 1), U(2024, 1, 4), _days(3, 4),
                     id="clamped-to-end-date"),
        pytest.param("@daily", U(2024, 1, 5), U(2024, 1, 3), U(2024, 1, 1), None, [], id="backwards-range"),
        pytest.param(timedelta(hours=12), U(2024, 1, 1), U(2024, 1, 2, 12), U(2024, 1, 1, 6), None,
                     [iv(U(2024, 1, 1, 6), U(2024, 1, 1, 18)), iv(U(2024, 1, 1, 18), U(2024, 1, 2, 6)),
                      iv(U(2024, 1, 2, 6), U(2024, 1, 2, 18))], id="timedelta"),
        pytest.param("@once", U(2024, 1, 1), U(2024, 1, 5), U(2024, 1, 3), None, [iv(U(2024, 1, 3), U(2024, 1, 3))],
                     id="once-inside"),
        pytest.param("@once", U(2024, 1, 4), U(2024, 1, 5), U(2024, 1, 3), None, [], id="once-outside"),
        pytest.param(None, U(2024, 1, 1), U(2024, 1, 5), U(2024, 1, 1), None, [], id="none"),
    ],
)
def test_intervals_between(
    value: Any, earliest: DateTime, latest: DateTime, start: DateTime, end: DateTime | None,
    expected: list[DataInterval],
) -> None:
    assert sched(value, "UTC", start).intervals_between(earliest, latest, start_date=start, end_date=end) == expected


@pytest.mark.parametrize(
    ("tz", "day", "count"),
    [
        pytest.param(AMS, (2024, 3, 31), 23, id="amsterdam-spring-forward"),
        pytest.param(AMS, (2024, 10, 27), 25, id="amsterdam-fall-back"),
        pytest.param(NY, (2024, 3, 10), 23, id="new-york-spring-forward"),
        pytest.param(NY, (2024, 11, 3), 25, id="new-york-fall-back"),
        pytest.param(AMS, (2024, 6, 1), 24, id="ordinary-day"),
    ],
)
def test_a_local_day_holds_as_many_hourly_intervals_as_it_has_hours(tz: str, day: tuple[int, int, int],
                                                                   count: int) -> None:
    earliest = pendulum.datetime(*day, tz=tz)
    latest = pendulum.datetime(*day, 23, tz=tz)
    result = sched("@hourly", tz).intervals_between(earliest, latest, start_date=U(2024, 1, 1), end_date=None)
    assert len(result) == count
    assert all(i.end - i.start == timedelta(hours=1) for i in result)
    assert all(a.end == b.start for a, b in itertools.pairwise(result))


# -- interval_for and is_tick -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tz", "date", "expected"),
    [
        pytest.param("@daily", "UTC", U(2024, 1, 5), iv(U(2024, 1, 5), U(2024, 1, 6)), id="on-a-tick"),
        pytest.param("@daily", "UTC", U(2024, 1, 5, 13), iv(U(2024, 1, 5), U(2024, 1, 6)),
                     id="off-a-tick-is-the-interval-containing-it"),
        pytest.param("0 */6 * * *", "UTC", U(2024, 1, 5, 13), iv(U(2024, 1, 5, 12), U(2024, 1, 5, 18)),
                     id="six-hourly-off-a-tick"),
        pytest.param("@monthly", "UTC", U(2024, 2, 29, 12), iv(U(2024, 2, 1), U(2024, 3, 1)), id="monthly-leap-day"),
        pytest.param("0 2 * * *", AMS, U(2024, 3, 31, 1), iv(U(2024, 3, 31, 1), U(2024, 4, 1)),
                     id="shifted-spring-forward-tick"),
        pytest.param("0 2 * * *", AMS, U(2024, 3, 31, 0, 30), iv(U(2024, 3, 30, 1), U(2024, 3, 31, 1)),
                     id="just-before-the-shifted-tick"),
        pytest.param(timedelta(hours=2), "UTC", U(2024, 1, 1, 1), iv(U(2024, 1, 1, 1), U(2024, 1, 1, 3)),
                     id="timedelta-starts-at-the-date"),
        pytest.param("@once", "UTC", U(2024, 1, 1, 1), iv(U(2024, 1, 1, 1), U(2024, 1, 1, 1)), id="once"),
        pytest.param(None, "UTC", U(2024, 1, 1, 1), iv(U(2024, 1, 1, 1), U(2024, 1, 1, 1)), id="none"),
    ],
)
def test_interval_for_a_manual_or_backfill_date(value: Any, tz: str, date: DateTime, expected: DataInterval) -> None:
    assert sched(value, tz, U(2024, 1, 1)).interval_for(date) == expected


@pytest.mark.parametrize(
    ("value", "tz", "date", "expected"),
    [
        pytest.param("@daily", "UTC", U(2024, 1, 5), True, id="midnight"),
        pytest.param("@daily", "UTC", U(2024, 1, 5, 0, 0, 1), False, id="a-second-late"),
        pytest.param("@daily", "UTC", pendulum.datetime(2024, 1, 5, 1, tz=AMS), True, id="any-timezone-input"),
        pytest.param("0 2 * * *", AMS, U(2024, 3, 31, 1), True, id="nonexistent-0200-moves-to-0300"),
        pytest.param("0 2 * * *", AMS, U(2024, 3, 31, 0), False, id="0100-cet-before-the-gap"),
        pytest.param("0 2 * * *", AMS, U(2024, 10, 27, 0), False, id="first-0200-of-fall-back-is-skipped"),
        pytest.param("0 2 * * *", AMS, U(2024, 10, 27, 1), True, id="second-0200-of-fall-back"),
        pytest.param("0 1 * * *", NY, U(2024, 11, 3, 5), False, id="new-york-first-0100-is-skipped"),
        pytest.param("0 1 * * *", NY, U(2024, 11, 3, 6), True, id="new-york-second-0100"),
        pytest.param("0 * * * *", AMS, U(2024, 10, 27, 0), True, id="hourly-first-0200"),
        pytest.param("0 * * * *", AMS, U(2024, 10, 27, 1), True, id="hourly-second-0200"),
        pytest.param(timedelta(hours=1), "UTC", U(2024, 1, 1, 12, 17), True, id="timedelta-on-grid"),
        pytest.param(timedelta(hours=1), "UTC", U(2024, 1, 1, 8, 17), True, id="timedelta-grid-before-anchor"),
        pytest.param(timedelta(hours=1), "UTC", U(2024, 1, 1, 12), False, id="timedelta-off-grid"),
        pytest.param("@once", "UTC", U(2024, 1, 1, 10, 17), False, id="once"),
        pytest.param(None, "UTC", U(2024, 1, 1, 10, 17), False, id="none"),
    ],
)
def test_is_tick(value: Any, tz: str, date: DateTime, expected: bool) -> None:
    assert sched(value, tz, U(2024, 1, 1, 10, 17)).is_tick(date) is expected


# -- due_intervals ------------------------------------------------------------------------------

H = timedelta(hours=1)


@pytest.mark.parametrize(
    ("value", "start", "end", "after", "now", "catchup", "limit", "expected"),
    [
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 4, 12), True, None, _days(1, 2, 3),
                     id="catchup-creates-every-ended-interval"),
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 4, 12), False, None, _days(3),
                     id="no-catchup-creates-only-the-latest"),
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 4, 12), True, 2, _days(1, 2),
                     id="limit-keeps-the-oldest"),
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 2), True, None, _days(1),
                     id="due-exactly-when-the-interval-ends"),
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 1, 23, 59, 59), True, None, [],
                     id="not-due-before-the-interval-ends"),
        pytest.param("@daily", U(2024, 1, 1), None, U(2024, 6, 1), U(2024, 6, 3, 5), True, None,
                     [iv(U(2024, 6, 1), U(2024, 6, 2)), iv(U(2024, 6, 2), U(2024, 6, 3))],
                     id="fast-forward-past-a-backfill-with-catchup"),
        pytest.param("@daily", U(2024, 1, 1), None, U(2024, 6, 1), U(2024, 6, 3, 5), False, None,
                     [iv(U(2024, 6, 2), U(2024, 6, 3))], id="fast-forward-past-a-backfill-without-catchup"),
        pytest.param("@daily", U(2024, 1, 1), None, U(2024, 6, 10), U(2024, 6, 3, 5), False, None, [],
                     id="backfill-ahead-of-now"),
        pytest.param("@daily", U(2024, 1, 1), None, U(2024, 1, 4), U(2024, 1, 4, 12), False, None, [],
                     id="latest-due-already-created"),
        pytest.param("@daily", U(2024, 1, 1), U(2024, 1, 2), None, U(2024, 1, 10), True, None, _days(1, 2),
                     id="catchup-stops-at-end-date"),
        pytest.param("@daily", U(2024, 1, 1), U(2024, 1, 2), None, U(2024, 1, 10), False, None, _days(2),
                     id="no-catchup-latest-at-end-date"),
        pytest.param("@daily", U(2024, 1, 1), U(2024, 1, 2), U(2024, 1, 3), U(2024, 1, 10), False, None, [],
                     id="nothing-after-end-date"),
        pytest.param("@daily", U(2024, 2, 1), None, None, U(2024, 1, 10), True, None, [], id="start-date-in-future"),
        pytest.param("@daily", U(2024, 1, 1, 10), None, None, U(2024, 1, 4, 12), True, None, _days(2, 3),
                     id="start-date-off-the-tick-with-catchup"),
        pytest.param("@daily", U(2024, 1, 1, 10), None, None, U(2024, 1, 4, 12), False, None, _days(3),
                     id="start-date-off-the-tick-without-catchup"),
        pytest.param("@hourly", U(2000, 1, 1), None, None, U(2024, 5, 5, 5, 30), False, None,
                     [iv(U(2024, 5, 5, 4), U(2024, 5, 5, 5))], id="no-catchup-jumps-24-years-of-hours"),
        pytest.param(H, U(2024, 1, 1, 0, 30), None, None, U(2024, 1, 1, 3), True, None,
                     [iv(U(2024, 1, 1, 0, 30), U(2024, 1, 1, 1, 30)), iv(U(2024, 1, 1, 1, 30), U(2024, 1, 1, 2, 30))],
                     id="timedelta-catchup"),
        pytest.param(H, U(2024, 1, 1, 0, 30), None, None, U(2024, 1, 1, 3), False, None,
                     [iv(U(2024, 1, 1, 1, 30), U(2024, 1, 1, 2, 30))], id="timedelta-no-catchup"),
        pytest.param("@once", U(2024, 1, 1), None, None, U(2024, 1, 1), True, None, [iv(U(2024, 1, 1), U(2024, 1, 1))],
                     id="once-due-at-start-date"),
        pytest.param("@once", U(2024, 1, 1), None, None, U(2024, 1, 1), False, None,
                     [iv(U(2024, 1, 1), U(2024, 1, 1))], id="once-due-without-catchup"),
        pytest.param("@once", U(2024, 1, 2), None, None, U(2024, 1, 1), True, None, [], id="once-not-yet"),
        pytest.param("@once", U(2024, 1, 1), None, U(2024, 1, 1), U(2024, 2, 1), True, None, [], id="once-done"),
        pytest.param(None, U(2024, 1, 1), None, None, U(2024, 2, 1), True, None, [], id="none"),
        pytest.param("@daily", U(2024, 1, 1), None, None, U(2024, 1, 4, 12), True, 0, [], id="zero-limit"),
    ],
)
def test_due_intervals(
    value: Any, start: DateTime, end: DateTime | None, after: DateTime | None, now: DateTime, catchup: bool,
    limit: int | None, expected: list[DataInterval],
) -> None:
    result = due_intervals(sched(value, "UTC", start), start_date=start, end_date=end, after=after, now=now,
                           catchup=catchup, limit=limit)
    assert result == expected


class _CountingCroniter(croniter):  # type: ignore[misc]
    steps = 0

    def get_next(self, *args: Any, **kwargs: Any) -> Any:
        _CountingCroniter.steps += 1
        return super().get_next(*args, **kwargs)

    def get_prev(self, *args: Any, **kwargs: Any) -> Any:
        _CountingCroniter.steps += 1
        return super().get_prev(*args, **kwargs)


@pytest.mark.parametrize(
    ("value", "tz"),
    [
        pytest.param("@hourly", "UTC", id="hourly-utc"),
        pytest.param("*/5 * * * *", NY, id="five-minutely-new-york"),
        pytest.param("0 2 * * *", AMS, id="daily-amsterdam"),
        pytest.param("*/10 6-18 * * *", AMS, id="pinned-hours-amsterdam"),
    ],
)
def test_no_catchup_jumps_instead_of_walking_years_of_ticks(
    value: str, tz: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = sched(value, tz)
    monkeypatch.setattr(schedule_module, "croniter", _CountingCroniter)
    _CountingCroniter.steps = 0
    now = U(2024, 5, 5, 5, 30)
    [latest] = due_intervals(schedule, start_date=U(2014, 1, 1), end_date=None, after=U(2014, 1, 1), now=now,
                             catchup=False)
    assert _CountingCroniter.steps < 500
    assert latest.end <= now < schedule.next_interval(after=latest.end, start_date=U(2014, 1, 1),
                                                      end_date=None).end  # type: ignore[union-attr]


def test_catchup_with_a_limit_returns_the_oldest_quickly() -> None:
    result = due_intervals(sched("@hourly"), start_date=U(2000, 1, 1), end_date=None, after=None,
                           now=U(2024, 5, 5), catchup=True, limit=3)
    assert [i.start for i in result] == [U(2000, 1, 1, 0), U(2000, 1, 1, 1), U(2000, 1, 1, 2)]


def test_schedule_maths_never_reads_the_clock() -> None:
    def compute() -> list[DataInterval]:
        return due_intervals(sched("@daily", AMS), start_date=U(2024, 1, 1), end_date=None, after=None,
                             now=U(2024, 1, 4), catchup=True)

    with freeze_time("1999-01-01"):
        early = compute()
    with freeze_time("2030-01-01"):
        late = compute()
    assert early == late == compute()


# -- upcoming_intervals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "end", "n", "expected"),
    [
        pytest.param("@daily", None, 3, _days(1, 2, 3), id="next-three"),
        pytest.param("@daily", U(2024, 1, 2), 3, _days(1, 2), id="stops-at-end-date"),
        pytest.param("@daily", None, 0, [], id="none-asked"),
        pytest.param("@once", None, 3, [iv(U(2024, 1, 1), U(2024, 1, 1))], id="once"),
        pytest.param(None, None, 3, [], id="none"),
    ],
)
def test_upcoming_intervals(value: Any, end: DateTime | None, n: int, expected: list[DataInterval]) -> None:
    start = U(2024, 1, 1)
    assert upcoming_intervals(sched(value, "UTC", start), start_date=start, end_date=end, after=None, n=n) == expected


# -- DST ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "tz", "start", "expected"),
    [
        pytest.param("0 2 * * *", AMS, U(2024, 3, 29), [
            iv(U(2024, 3, 29, 1), U(2024, 3, 30, 1)),
            iv(U(2024, 3, 30, 1), U(2024, 3, 31, 1)),  # 02:00 CET -> 03:00 CEST: 02:00 does not exist
            iv(U(2024, 3, 31, 1), U(2024, 4, 1, 0)),  # 23 hours
            iv(U(2024, 4, 1, 0), U(2024, 4, 2, 0)),
        ], id="amsterdam-0200-spring-forward"),
        pytest.param("30 2 * * *", AMS, U(2024, 3, 29, 12), [
            iv(U(2024, 3, 30, 1, 30), U(2024, 3, 31, 1, 30)),  # 02:30 -> 03:30 CEST
            iv(U(2024, 3, 31, 1, 30), U(2024, 4, 1, 0, 30)),
        ], id="amsterdam-0230-moves-forward-by-the-gap"),
        pytest.param("0 2 * * *", AMS, U(2024, 10, 25), [
            iv(U(2024, 10, 25, 0), U(2024, 10, 26, 0)),
            iv(U(2024, 10, 26, 0), U(2024, 10, 27, 1)),  # 25 hours: the second 02:00 (CET)
            iv(U(2024, 10, 27, 1), U(2024, 10, 28, 1)),
        ], id="amsterdam-0200-fall-back"),
        pytest.param("0 1 * * *", AMS, U(2024, 10, 25), [
            iv(U(2024, 10, 25, 23), U(2024, 10, 26, 23)),
            iv(U(2024, 10, 26, 23), U(2024, 10, 28, 0)),  # 01:00 CEST -> 01:00 CET
            iv(U(2024, 10, 28, 0), U(2024, 10, 29, 0)),
        ], id="amsterdam-0100-fall-back"),
        pytest.param("0 2 * * *", NY, U(2024, 3, 8, 12), [
            iv(U(2024, 3, 9, 7), U(2024, 3, 10, 7)),  # 02:00 EST -> 03:00 EDT
            iv(U(2024, 3, 10, 7), U(2024, 3, 11, 6)),
            iv(U(2024, 3, 11, 6), U(2024, 3, 12, 6)),
        ], id="new-york-0200-spring-forward"),
        pytest.param("0 1 * * *", NY, U(2024, 3, 8, 12), [
            iv(U(2024, 3, 9, 6), U(2024, 3, 10, 6)),
            iv(U(2024, 3, 10, 6), U(2024, 3, 11, 5)),  # 01:00 EST -> 01:00 EDT
        ], id="new-york-0100-spring-forward"),
        pytest.param("0 1 * * *", NY, U(2024, 11, 1, 12), [
            iv(U(2024, 11, 2, 5), U(2024, 11, 3, 6)),  # 01:00 EDT -> the second 01:00 (EST): 25 hours
            iv(U(2024, 11, 3, 6), U(2024, 11, 4, 6)),
        ], id="new-york-0100-fall-back"),
        pytest.param("0 2 * * *", NY, U(2024, 11, 1, 12), [
            iv(U(2024, 11, 2, 6), U(2024, 11, 3, 7)),
            iv(U(2024, 11, 3, 7), U(2024, 11, 4, 7)),
        ], id="new-york-0200-fall-back"),
    ],
)
def test_daily_crons_follow_the_wall_clock_across_dst(
    expression: str, tz: str, start: DateTime, expected: list[DataInterval]
) -> None:
    result = upcoming_intervals(sched(expression, tz), start_date=start, end_date=None, after=None, n=len(expected))
    assert result == expected


@pytest.mark.parametrize("expression", ["0 * * * *", "30 * * * *", "*/20 * * * *"])
@pytest.mark.parametrize(
    ("tz", "start"),
    [
        pytest.param(AMS, U(2024, 3, 30, 22), id="amsterdam-spring-forward"),
        pytest.param(AMS, U(2024, 10, 26, 22), id="amsterdam-fall-back"),
        pytest.param(NY, U(2024, 3, 10, 4), id="new-york-spring-forward"),
        pytest.param(NY, U(2024, 11, 3, 3), id="new-york-fall-back"),
    ],
)
def test_sub_hourly_crons_stay_exact_in_utc_across_dst(expression: str, tz: str, start: DateTime) -> None:
    schedule = sched(expression, tz)
    result = upcoming_intervals(schedule, start_date=start, end_date=None, after=None, n=12)
    reference = upcoming_intervals(sched(expression, "UTC"), start_date=start, end_date=None, after=None, n=12)
    assert result == reference  # whole-hour offsets: the same instants as in UTC, no gap, no duplicate
    assert len({i.start for i in result}) == 12


LORD_HOWE = "Australia/Lord_Howe"  # DST shifts by 30 minutes: +10:30 (LHST) <-> +11 (LHDT)


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        # fall-back 2024-04-07 02:00 LHDT -> 01:30 LHST (15:00Z): like Airflow, 01:00 LHDT + 1 h is the next tick,
        # 01:30 LHST on the wall clock, then 02:00 LHST 30 minutes later
        pytest.param("0 * * * *", U(2024, 4, 6, 13), [
            iv(U(2024, 4, 6, 13), U(2024, 4, 6, 14)), iv(U(2024, 4, 6, 14), U(2024, 4, 6, 15)),
            iv(U(2024, 4, 6, 15), U(2024, 4, 6, 15, 30)), iv(U(2024, 4, 6, 15, 30), U(2024, 4, 6, 16, 30)),
            iv(U(2024, 4, 6, 16, 30), U(2024, 4, 6, 17, 30)),
        ], id="lord-howe-hourly-fall-back"),
        pytest.param("30 * * * *", U(2024, 4, 6, 13, 30), [
            iv(U(2024, 4, 6, 13, 30), U(2024, 4, 6, 14, 30)), iv(U(2024, 4, 6, 14, 30), U(2024, 4, 6, 15, 30)),
            iv(U(2024, 4, 6, 15, 30), U(2024, 4, 6, 16)), iv(U(2024, 4, 6, 16), U(2024, 4, 6, 17)),
        ], id="lord-howe-half-past-fall-back"),
        # spring-forward 2024-10-06 02:00 LHST -> 02:30 LHDT (15:30Z)
        pytest.param("0 * * * *", U(2024, 10, 5, 13, 30), [
            iv(U(2024, 10, 5, 13, 30), U(2024, 10, 5, 14, 30)), iv(U(2024, 10, 5, 14, 30), U(2024, 10, 5, 15, 30)),
            iv(U(2024, 10, 5, 15, 30), U(2024, 10, 5, 16)), iv(U(2024, 10, 5, 16), U(2024, 10, 5, 17)),
        ], id="lord-howe-hourly-spring-forward"),
        pytest.param("30 * * * *", U(2024, 10, 5, 14), [
            iv(U(2024, 10, 5, 14), U(2024, 10, 5, 15)), iv(U(2024, 10, 5, 15), U(2024, 10, 5, 16)),
            iv(U(2024, 10, 5, 16), U(2024, 10, 5, 16, 30)), iv(U(2024, 10, 5, 16, 30), U(2024, 10, 5, 17, 30)),
        ], id="lord-howe-half-past-spring-forward"),
        # a start date between the change and the first tick after it, which still keeps the old offset
        pytest.param("30 * * * *", U(2024, 4, 6, 15, 10), [
            iv(U(2024, 4, 6, 15, 30), U(2024, 4, 6, 16)), iv(U(2024, 4, 6, 16), U(2024, 4, 6, 17)),
        ], id="lord-howe-half-past-start-date-just-after-fall-back"),
    ],
)
def test_hourly_crons_across_a_half_hour_dst_shift_agree_walking_forward_and_back(
    expression: str, start: DateTime, expected: list[DataInterval]
) -> None:
    schedule = sched(expression, LORD_HOWE)
    assert upcoming_intervals(schedule, start_date=start, end_date=None, after=None, n=len(expected)) == expected
    for interval in expected:
        assert schedule.is_tick(interval.start)
        assert schedule.interval_for(interval.start) == interval
        assert schedule.interval_for(interval.start.add(minutes=10)) == interval
        for now in (interval.end, interval.end.add(minutes=10)):
            # without catchup, the latest due interval is the last one catchup creates
            every = due_intervals(schedule, start_date=start, end_date=None, after=None, now=now, catchup=True)
            assert every[-1] == interval
            assert due_intervals(schedule, start_date=start, end_date=None, after=None, now=now,
                                 catchup=False) == [interval]


def test_without_catchup_lord_howe_hourly_takes_the_half_hour_interval_of_the_fall_back_night() -> None:
    # the example Hypothesis found: the jump back from `now` used to land on 14:30Z (01:30 LHDT), not a tick
    schedule = sched("0 * * * *", LORD_HOWE)
    result = due_intervals(schedule, start_date=U(2024, 4, 6, 9, 30), end_date=None, after=None,
                           now=U(2024, 4, 6, 15, 30), catchup=False)
    assert result == [iv(U(2024, 4, 6, 15), U(2024, 4, 6, 15, 30))]


@pytest.mark.parametrize("expression", ["0 * * * *", "30 * * * *", "45 * * * *", "0,10 * * * *", "*/7 * * * *"])
@pytest.mark.parametrize(
    ("tz", "change"),
    [
        pytest.param(LORD_HOWE, U(2024, 4, 6, 15), id="lord-howe-fall-back"),
        pytest.param(LORD_HOWE, U(2024, 10, 5, 15, 30), id="lord-howe-spring-forward"),
        pytest.param("Asia/Kathmandu", U(1985, 12, 31, 18, 30), id="kathmandu-1986-plus-15-minutes"),
        pytest.param("Pacific/Chatham", U(2024, 4, 6, 14), id="chatham-fall-back"),
        pytest.param("Australia/Adelaide", U(2024, 10, 5, 16, 30), id="adelaide-spring-forward"),
    ],
)
def test_every_hour_crons_step_without_a_cron_walk_away_from_offset_changes_as_the_walk_does(
    expression: str, tz: str, change: DateTime
) -> None:
    fast = sched(expression, tz)
    assert isinstance(fast, CronSchedule) and fast._dense
    walked = sched(expression, tz)
    object.__setattr__(walked, "_dense", False)  # always looks for an offset change before the tick
    for minutes in range(-5 * 60, 5 * 60, 7):
        t = change.add(minutes=minutes)
        for forward in (True, False):
            assert fast._find_tick(t, forward) == walked._find_tick(t, forward)


@pytest.mark.parametrize(
    ("now", "catchup", "expected"),
    [
        pytest.param(U(2024, 4, 1, 0, 30), False, [iv(U(2024, 3, 31, 1), U(2024, 4, 1, 0))], id="latest-is-23h"),
        pytest.param(U(2024, 3, 31, 23, 59), False, [iv(U(2024, 3, 30, 1), U(2024, 3, 31, 1))], id="before-it-ends"),
        pytest.param(U(2024, 4, 1, 0, 30), True, [
            iv(U(2024, 3, 29, 1), U(2024, 3, 30, 1)), iv(U(2024, 3, 30, 1), U(2024, 3, 31, 1)),
            iv(U(2024, 3, 31, 1), U(2024, 4, 1, 0)),
        ], id="catchup"),
    ],
)
def test_due_intervals_across_spring_forward(now: DateTime, catchup: bool, expected: list[DataInterval]) -> None:
    result = due_intervals(sched("0 2 * * *", AMS), start_date=U(2024, 3, 29), end_date=None, after=None, now=now,
                           catchup=catchup)
    assert result == expected


# -- properties -----------------------------------------------------------------------------------

CRONS = [
    "0 * * * *", "30 * * * *", "*/15 * * * *", "0 */6 * * *", "0 2 * * *", "0 1 * * *", "30 2 * * *",
    "15,45 2,3 * * *", "0 9-17 * * 1-5", "@daily", "@weekly", "@monthly", "0 0 29 2 *",
]
TIMEZONES = [
    "UTC", AMS, NY, "Europe/London", "Australia/Sydney", "Australia/Lord_Howe", "Asia/Kolkata",
    "America/Sao_Paulo", "Pacific/Chatham", "America/St_Johns",
]
TRANSITIONS = [
    U(2024, 3, 10, 7), U(2024, 3, 31, 1), U(2024, 10, 27, 1), U(2024, 11, 3, 6), U(2024, 4, 6, 15),
    U(2024, 10, 5, 15), U(2024, 9, 28, 14), U(2025, 3, 9, 6), U(2018, 11, 4, 3), U(2019, 2, 17, 2),
]


@st.composite
def instants(draw: st.DrawFn) -> DateTime:
    base = draw(st.sampled_from(TRANSITIONS))
    minutes = draw(st.integers(min_value=-3 * 24 * 60, max_value=3 * 24 * 60))
    seconds = draw(st.sampled_from([0, 0, 0, 1, 59]))
    return base.add(minutes=minutes, seconds=seconds)


@settings(max_examples=examples(150), deadline=None)
@given(expression=st.sampled_from(CRONS), tz=st.sampled_from(TIMEZONES), start=instants(),
       after_offset=st.one_of(st.none(), st.integers(min_value=0, max_value=3 * 24 * 60)))
def test_consecutive_intervals_are_increasing_and_never_overlap(
    expression: str, tz: str, start: DateTime, after_offset: int | None
) -> None:
    schedule = sched(expression, tz)
    after = None if after_offset is None else start.add(minutes=after_offset)
    previous: DataInterval | None = None
    for _ in range(8):
        interval = schedule.next_interval(after=after, start_date=start, end_date=None)
        assert interval is not None
        assert interval.start.timezone_name == "UTC"
        assert interval.end > interval.start >= start
        assert after is None or interval.start >= after
        assert schedule.is_tick(interval.start)
        assert schedule.interval_for(interval.start) == interval
        if previous is not None:
            assert interval.start > previous.start
            assert interval.start >= previous.end
        previous = interval
        after = interval.end


@settings(max_examples=examples(150), deadline=None)
@given(expression=st.sampled_from(CRONS), tz=st.sampled_from(TIMEZONES), date=instants())
def test_interval_for_contains_the_date(expression: str, tz: str, date: DateTime) -> None:
    interval = sched(expression, tz).interval_for(date)
    assert interval.start <= date < interval.end


@settings(max_examples=examples(100), deadline=None)
@given(expression=st.sampled_from(CRONS[:9]), tz=st.sampled_from(TIMEZONES), start=instants(),
       hours=st.integers(min_value=0, max_value=72))
def test_without_catchup_the_latest_due_interval_is_the_last_one_catchup_would_create(
    expression: str, tz: str, start: DateTime, hours: int
) -> None:
    schedule = sched(expression, tz)
    now = start.add(hours=hours)
    every = due_intervals(schedule, start_date=start, end_date=None, after=None, now=now, catchup=True)
    latest = due_intervals(schedule, start_date=start, end_date=None, after=None, now=now, catchup=False)
    assert latest == every[-1:]


# -- next_scheduled: what the scheduler creates next, and what `dags next-runs` prints -------------------


def test_next_scheduled_without_catchup_starts_at_the_latest_due_interval_then_follows_the_schedule() -> None:
    from ledger.core.schedule import next_scheduled

    s = sched("0 6 * * *", "UTC", U(2026, 11, 1))
    got = next_scheduled(s, start_date=U(2026, 11, 1), end_date=None, after=None, now=U(2026, 11, 24, 7),
                         catchup=False, n=3)
    # the interval [11-23 06:00, 11-24 06:00) is the latest that has ended: the scheduler creates that one
    assert [i.logical_date for i in got] == [U(2026, 11, 23, 6), U(2026, 11, 24, 6), U(2026, 11, 25, 6)]


def test_next_scheduled_with_catchup_lists_every_due_interval_first() -> None:
    from ledger.core.schedule import next_scheduled

    s = sched("@daily", "UTC", U(2026, 11, 20))
    got = next_scheduled(s, start_date=U(2026, 11, 20), end_date=None, after=U(2026, 11, 22), now=U(2026, 11, 24, 1),
                         catchup=True, n=4)
    assert [i.logical_date.day for i in got] == [22, 23, 24, 25]


def test_next_scheduled_skips_dates_held_by_a_manual_run_and_stops_at_end_date() -> None:
    from ledger.core.schedule import next_scheduled

    s = sched("@daily", "UTC", U(2026, 11, 1))
    got = next_scheduled(s, start_date=U(2026, 11, 1), end_date=U(2026, 11, 27), after=U(2026, 11, 23),
                         now=U(2026, 11, 24, 1), catchup=True, held={U(2026, 11, 25)}, n=10)
    assert [i.logical_date.day for i in got] == [23, 24, 26, 27]


def test_next_scheduled_off_tick_hourly_without_catchup_takes_the_latest_hour() -> None:
    from ledger.core.schedule import next_scheduled

    start = U(2026, 11, 24, 15, 37)
    s = sched("@hourly", "UTC", start)
    got = next_scheduled(s, start_date=start, end_date=None, after=None, now=U(2026, 11, 24, 21, 5),
                         catchup=False, n=2)
    assert [i.logical_date for i in got] == [U(2026, 11, 24, 20), U(2026, 11, 24, 21)]


EVEN = ["0 * * * *", "30 * * * *", "7 * * * *", "0 0 * * *", "0 2 * * *", "30 2 * * *", "59 23 * * *", "@daily",
        "@hourly"]
FIXED_ZONES = ["UTC", "Etc/UTC", "Etc/GMT-5", "Etc/GMT+11", "GMT"]


@settings(max_examples=examples(300), deadline=None)
@given(expression=st.sampled_from(EVEN), tz=st.sampled_from(FIXED_ZONES), t=instants(), forward=st.booleans(),
       micros=st.sampled_from([0, 1, 999_999]))
def test_hourly_and_daily_ticks_in_a_zone_without_dst_are_found_by_arithmetic_as_croniter_finds_them(
    expression: str, tz: str, t: DateTime, forward: bool, micros: int
) -> None:
    fast = sched(expression, tz)
    assert isinstance(fast, CronSchedule) and fast._even is not None
    walked = sched(expression, tz)
    object.__setattr__(walked, "_even", None)  # the cron walk every other schedule takes
    t = t.add(microseconds=micros)
    assert fast._find_tick(t, forward) == walked._find_tick(t, forward)


def test_only_hourly_and_daily_cron_in_zones_without_dst_take_the_arithmetic() -> None:
    def even(expression: str, tz: str) -> bool:
        s = sched(expression, tz)
        return isinstance(s, CronSchedule) and s._even is not None

    assert even("@daily", "UTC") and even("15 * * * *", "Etc/GMT+3")
    assert not even("@daily", AMS) and not even("@daily", "Asia/Kolkata")  # zones whose offset has changed
    assert not even("*/15 * * * *", "UTC") and not even("0 0 * * 1", "UTC") and not even("0 */6 * * *", "UTC")
