"""Schedule maths: data intervals of cron, preset, timedelta, @once and manual-only schedules.

Pure functions of their arguments: no I/O, no database, no clock (``now`` is always passed in).
Every DateTime returned is an aware pendulum DateTime in UTC; the DAG timezone is only used for
cron arithmetic. The semantics follow Apache Airflow's ``CronDataIntervalTimetable`` and
``DeltaDataIntervalTimetable``: a run covers the data interval [start, end), its logical date is
the start, it is due once the interval has ended, the first interval is the first whole one
starting at or after ``start_date``, and no interval has a logical date after ``end_date``
(inclusive).

Decisions (documented for users):

* Cron is evaluated on the wall clock of the schedule's timezone. croniter is only ever given
  naive, whole-minute wall-clock datetimes (its aware-datetime DST handling is buggy, and it
  computes with float timestamps); results are localized with pendulum.
* Crons that pin the hour (``0 2 * * *``, ``@daily``): like Airflow, a wall time that does not exist
  (spring-forward gap) is shifted forward by the gap (02:00 -> 03:00, 02:30 -> 03:30), and a wall
  time that happens twice (fall-back) is taken at its *second* occurrence (standard time). Those
  days' intervals are 23 h / 25 h long. If two wall ticks land on the same instant, it is one tick.
* Crons whose hour field is ``*`` (``0 * * * *``, ``*/15 * * * *``): like Airflow, the distance to
  the next/previous wall-clock match is added to the *absolute* time, so hourly schedules stay
  exactly one hour long in UTC across DST, with no gap and no duplicate (both 02:00s of a fall-back
  night are ticks). Each tick is the previous one plus the wall-clock distance read at the *previous*
  tick's offset, so when the offset changes by other than whole hours (Lord Howe's 30-minute DST), the
  first tick after the change still keeps the old offset and the next interval absorbs the shift
  (01:00 LHDT, 01:30 LHST, 02:00 LHST: 1 h then 30 min). The ticks are those of that forward walk (what
  catchup creates): a step back, ``is_tick``, ``interval_for`` and a start date between the change and
  that first tick all use them.
* Timedelta schedules are computed in UTC and anchored at ``start_date``: ticks are
  ``start_date + k * delta`` (Airflow instead continues from the previous run's end). Without an
  anchor (``parse_schedule(..., start_date=None)``), the ``start_date`` passed to
  ``next_interval`` etc. anchors it, and the Unix epoch anchors ``is_tick``.
* A schedule change continues at the first interval of the new schedule starting at or after the
  previous run's interval end (Airflow would align back to the tick before it).
* ``interval_for(d)`` (manual trigger / backfill of an arbitrary date): if ``d`` is a tick, [d, next
  tick); otherwise the interval containing d, [previous tick, next tick). Timedelta: [d, d + delta).
  @once and None: [d, d].
* @once has the single interval [start_date, start_date], due when now >= start_date, and only if
  the DAG has no scheduled run yet (``after is None``).
* Only 5-field crons: seconds/year fields, hashed (H) and random (R) fields are refused.
"""

from __future__ import annotations

import abc
import calendar
import collections
import datetime as dt
import itertools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

import pendulum
from croniter import CroniterBadDateError, CroniterError, croniter
from pendulum import DateTime
from pendulum.tz.timezone import FixedTimezone, Timezone

from ledger.core.errors import LedgerError

__all__ = [
    "PRESETS", "After", "CronSchedule", "DataInterval", "DeltaSchedule", "NoSchedule", "OnceSchedule", "Schedule",
    "ScheduleError", "due_intervals", "end_of", "next_scheduled", "parse_schedule", "upcoming_intervals",
]  # fmt: skip

_UTC = pendulum.UTC
PRESETS: dict[str, str] = {
    "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
}  # fmt: skip
_MINUTE = dt.timedelta(minutes=1)
_TINY = dt.timedelta(microseconds=1)
# Largest UTC-offset change we handle exactly at a DST/offset transition (real ones are <= 2 h).
_WINDOW = dt.timedelta(hours=3)
_HASHED = re.compile(r"(?<![a-z])[hr](?![a-z])", re.IGNORECASE)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ScheduleError(LedgerError, ValueError):
    """A schedule value or argument that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class DataInterval:
    start: DateTime
    end: DateTime

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"data interval ends before it starts: {self.start} > {self.end}")

    @property
    def logical_date(self) -> DateTime:
        return self.start


After = DateTime | DataInterval | None  # where a schedule resumes: the latest run's interval end, or its interval


def end_of(after: dt.datetime | DataInterval | None) -> DateTime | None:
    """The instant a schedule resumes from: `after` itself, or the end of the interval given."""
    if isinstance(after, DataInterval):
        return _utc(after.end, "after")
    return None if after is None else _utc(after, "after")


def _utc(d: dt.datetime, what: str = "datetime") -> DateTime:
    if d.tzinfo is None or d.utcoffset() is None:
        raise ScheduleError(f"{what} must be timezone-aware, got naive {d.isoformat()}")
    return pendulum.instance(d).in_timezone(_UTC)


def _load_timezone(name: str) -> Timezone | FixedTimezone:
    try:
        return pendulum.timezone(name)
    except (ValueError, KeyError, OSError):
        raise ScheduleError(f"unknown timezone {name!r}: expected an IANA name such as 'Europe/Amsterdam'") from None


def _floor_minute(w: dt.datetime) -> dt.datetime:
    return w.replace(second=0, microsecond=0)


def _beyond(a: dt.datetime, b: dt.datetime, forward: bool) -> bool:
    return a > b if forward else a < b


class Schedule(abc.ABC):
    """When a DAG runs. Subclasses: CronSchedule, DeltaSchedule, OnceSchedule, NoSchedule."""

    __slots__ = ()
    timezone: str

    @abc.abstractmethod
    def describe(self) -> dict[str, object]:
        """Canonical JSON-able description (part of the DAG version hash)."""

    @abc.abstractmethod
    def summary(self) -> str:
        """Short human text: '0 0 * * *', '@daily', 'every 1:00:00', '@once', 'None'."""

    @abc.abstractmethod
    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        """The first interval starting at or after max(after, start_date); None if past end_date. `after`: the
        data-interval end of the latest scheduled run, or that run's whole interval (a timetable may read its
        start, as Airflow's `last_automated_data_interval`)."""

    @abc.abstractmethod
    def intervals_between(
        self, earliest: DateTime, latest: DateTime, *, start_date: DateTime, end_date: DateTime | None
    ) -> list[DataInterval]:
        """Intervals whose logical date is in [earliest, latest] and [start_date, end_date], oldest first."""

    @abc.abstractmethod
    def interval_for(self, logical_date: DateTime) -> DataInterval:
        """Data interval of a run at an arbitrary date: on a tick [d, next tick), else the one containing d."""

    @abc.abstractmethod
    def is_tick(self, d: DateTime) -> bool:
        """Whether d is an interval start of this schedule (start_date ignored)."""

    def _first_due(
        self, *, start_date: DateTime, end_date: DateTime | None, after: After, now: DateTime
    ) -> DataInterval | None:
        """The next interval from `after` if it has ended by `now`, else None."""
        first = self.next_interval(after=after, start_date=start_date, end_date=end_date)
        return None if first is None or first.end > now else first

    def _latest_due(
        self, *, start_date: DateTime, end_date: DateTime | None, after: After, now: DateTime
    ) -> DataInterval | None:
        due = itertools.takewhile(lambda i: i.end <= now, _walk(self, start_date, end_date, after))
        last = collections.deque(due, maxlen=1)
        return last[0] if last else None


class _PeriodicSchedule(Schedule):
    """A schedule defined by an infinite, strictly increasing set of ticks (UTC instants)."""

    __slots__ = ()

    @abc.abstractmethod
    def _tick(self, t: DateTime, forward: bool) -> DateTime:
        """The nearest tick strictly after (forward) or strictly before t (t in UTC)."""

    def _after(self, t: DateTime) -> DateTime:
        return self._tick(t, True)

    def _before(self, t: DateTime) -> DateTime:
        return self._tick(t, False)

    def _bind(self, start_date: DateTime) -> _PeriodicSchedule:
        return self

    def _at_or_after(self, t: DateTime) -> DateTime:
        return self._after(t - _TINY)

    def _at_or_before(self, t: DateTime) -> DateTime:
        return self._before(t + _TINY)

    def is_tick(self, d: DateTime) -> bool:
        d = _utc(d, "date")
        return self._at_or_after(d) == d

    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        start_date = _utc(start_date, "start_date")
        sched = self._bind(start_date)
        after = end_of(after)
        lower = start_date if after is None else max(_utc(after, "after"), start_date)
        start = sched._at_or_after(lower)
        if end_date is not None and start > _utc(end_date, "end_date"):
            return None
        return DataInterval(start, sched._after(start))

    def intervals_between(
        self, earliest: DateTime, latest: DateTime, *, start_date: DateTime, end_date: DateTime | None
    ) -> list[DataInterval]:
        start_date = _utc(start_date, "start_date")
        sched = self._bind(start_date)
        upper = _utc(latest, "latest")
        if end_date is not None:
            upper = min(upper, _utc(end_date, "end_date"))
        start = sched._at_or_after(max(_utc(earliest, "earliest"), start_date))
        result: list[DataInterval] = []
        while start <= upper:
            end = sched._after(start)
            result.append(DataInterval(start, end))
            start = end
        return result

    def interval_for(self, logical_date: DateTime) -> DataInterval:
        d = _utc(logical_date, "logical date")
        start = d if self.is_tick(d) else self._before(d)
        return DataInterval(start, self._after(d))

    def _latest_due(
        self, *, start_date: DateTime, end_date: DateTime | None, after: After, now: DateTime
    ) -> DataInterval | None:
        # Jump straight to the last interval that ended by `now` instead of walking to it.
        if self._first_due(start_date=start_date, end_date=end_date, after=after, now=now) is None:
            return None
        sched = self._bind(_utc(start_date, "start_date"))
        start = sched._before(sched._at_or_before(now))
        if end_date is not None and start > end_date:
            start = sched._at_or_before(_utc(end_date, "end_date"))
        return DataInterval(start, sched._after(start))


@dataclass(frozen=True, slots=True)
class CronSchedule(_PeriodicSchedule):
    """A 5-field cron expression (or preset) evaluated on the wall clock of `timezone`."""

    expression: str
    timezone: str = "UTC"
    preset: str | None = field(default=None, compare=False)
    _tz: Timezone | FixedTimezone = field(init=False, repr=False, compare=False)
    _fixed: bool = field(init=False, repr=False, compare=False)
    # _fixed, and every day matches: a wall-clock match at least every hour
    _dense: bool = field(init=False, repr=False, compare=False)
    # (first tick, period) in UTC microseconds when the ticks are evenly spaced in absolute time: None otherwise
    _even: tuple[int, int] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = " ".join(self.expression.split())
        preset = self.preset
        if text.startswith("@"):
            preset = text.lower()
            if preset not in PRESETS:
                known = ", ".join(["@once", *PRESETS])
                raise ScheduleError(f"unknown schedule preset {text!r}: expected one of {known}")
            text = PRESETS[preset]
        elif not text:
            raise ScheduleError("invalid cron expression '': it is empty")
        fields = text.split()
        if len(fields) != 5:
            raise ScheduleError(
                f"invalid cron expression {text!r}: expected 5 fields "
                f"(minute hour day-of-month month day-of-week), got {len(fields)}"
            )
        if _HASHED.search(text):
            raise ScheduleError(f"invalid cron expression {text!r}: hashed (H) and random (R) fields are not supported")
        try:
            cron = croniter(text, dt.datetime(2000, 1, 1))
            cron.get_next(dt.datetime)
        except CroniterBadDateError:
            raise ScheduleError(f"invalid cron expression {text!r}: it never matches any date") from None
        except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise ScheduleError(f"invalid cron expression {text!r}: {exc}") from None
        object.__setattr__(self, "expression", text)
        object.__setattr__(self, "preset", preset)
        object.__setattr__(self, "_tz", _load_timezone(self.timezone))
        # Like Airflow: a cron that fires every hour is computed on absolute time (see module doc).
        object.__setattr__(self, "_fixed", cron.expanded[1] == ["*"])
        object.__setattr__(self, "_dense", self._fixed and fields[2:] == ["*", "*", "*"])
        object.__setattr__(self, "_even", _even_ticks(fields, self.timezone, self._tz))

    def describe(self) -> dict[str, object]:
        return {"type": "cron", "expression": self.expression, "timezone": self.timezone}

    def summary(self) -> str:
        return self.preset or self.expression

    # -- wall clock <-> UTC ---------------------------------------------------------------------
    def _wall(self, t: DateTime) -> dt.datetime:
        local = t.in_timezone(self._tz)
        return dt.datetime(
            local.year, local.month, local.day, local.hour, local.minute, local.second, local.microsecond
        )

    def _localize(self, wall: dt.datetime) -> DateTime:
        # fold=1: the second occurrence of an ambiguous time; a non-existent time moves forward.
        return pendulum.instance(self._tz.convert(wall.replace(fold=1))).in_timezone(_UTC)

    def _step(self, start: dt.datetime, forward: bool) -> Iterator[dt.datetime]:
        """Iterate wall-clock ticks strictly after (forward) or before a whole-minute wall time."""
        cron = _CRONS.get(self.expression)
        if cron is None:  # parsing an expression is the costly part of croniter: do it once
            cron = _CRONS[self.expression] = croniter(self.expression, start)
        else:
            cron.set_current(start, force=True)
        try:
            while True:
                yield cron.get_next(dt.datetime) if forward else cron.get_prev(dt.datetime)
        except CroniterBadDateError:
            raise ScheduleError(f"cron expression {self.expression!r} has no further date") from None

    def _tick(self, t: DateTime, forward: bool) -> DateTime:
        # a catch-up walks the same intervals again each time it creates a batch of runs, and croniter takes
        # a few hundred microseconds a tick: a tick, once found, is remembered (it depends on nothing else)
        key = (self.expression, self.timezone, t, forward)
        found = _TICKS.get(key)
        if found is None:
            if len(_TICKS) >= _TICKS_KEPT:
                _TICKS.clear()
            found = _TICKS[key] = self._find_tick(t, forward)
        return found

    def _find_tick(self, t: DateTime, forward: bool) -> DateTime:
        if self._even is not None:  # hourly or daily in a zone without DST: arithmetic, no cron walk
            first, period = self._even
            now = _micros(t)
            k, rest = divmod(now - first, period)
            tick = first + (k + 1 if forward else k if rest else k - 1) * period
            return t + dt.timedelta(microseconds=tick - now)
        if self._fixed:
            return self._hourly_tick(t, forward)
        wall = self._wall(t)
        # Localizing wall ticks is monotonic except right after a spring-forward gap, so scan every
        # wall tick that could land on the nearest instant (within _WINDOW of the first hit).
        start = _floor_minute(wall - _WINDOW) if forward else _floor_minute(wall + _WINDOW) + _MINUTE
        best: DateTime | None = None
        stop = wall
        for candidate in self._step(start, forward):
            if best is not None and _beyond(candidate, stop, forward):
                return best
            instant = self._localize(candidate)
            if _beyond(instant, t, forward) and (best is None or _beyond(best, instant, forward)):
                if best is None:
                    stop = candidate + _WINDOW if forward else candidate - _WINDOW
                best = instant
        raise AssertionError("unreachable: croniter iterates forever")  # pragma: no cover

    # -- crons whose hour field is "*": Airflow's absolute-time steps (on stdlib datetimes: pendulum's are slow) -
    def _hourly_tick(self, t: DateTime, forward: bool) -> DateTime:
        u = _std_utc(t)
        offset = self._offset(u)
        if self._dense and self._offset(u - _WINDOW) == offset:  # no offset change within reach: plain steps
            tick = self._hourly_match(u, offset, True) if forward else self._hourly_match(u - _TINY, offset, False)
        else:
            tick = self._hourly_step(self._hourly_at_or_before(u)) if forward else self._hourly_at_or_before(u - _TINY)
        return t + (tick - u)

    def _offset(self, u: dt.datetime) -> dt.timedelta:
        return u.astimezone(self._tz).utcoffset() or dt.timedelta(0)

    def _hourly_match(self, u: dt.datetime, offset: dt.timedelta, forward: bool) -> dt.datetime:
        """The nearest wall-clock match strictly after u (forward) or at or before u, the wall clock read at the
        UTC offset `offset`; the distance to it is taken in absolute time."""
        wall = (u + offset).replace(tzinfo=None)
        floor = _floor_minute(wall)
        match = next(self._step(floor if forward else floor + _MINUTE, forward))
        return u + (match - wall)

    def _hourly_step(self, tick: dt.datetime) -> dt.datetime:
        """The tick after `tick`: like Airflow, the wall-clock distance to the next match, read at the offset in
        force at `tick`, added to absolute time (so the step across an offset change keeps the old offset)."""
        return self._hourly_match(tick, self._offset(tick), True)

    def _hourly_at_or_before(self, u: dt.datetime) -> dt.datetime:
        """The last tick at or before u of the walk tick -> _hourly_step(tick), which is what catchup creates.

        Away from offset changes that is the last wall-clock match at or before u. Near one (the offset at the
        match before that one, or _WINDOW before it, differs), the first tick after the change is still on the
        old offset (01:00 LHDT + 1 h is 01:30 LHST at Lord Howe's half-hour fall-back), which the wall clock at
        u does not show: walk forward from the last tick before the change instead."""
        offset = self._offset(u)
        match = self._hourly_match(u, offset, False)
        previous = self._hourly_match(match - _TINY, offset, False)
        if all(self._offset(d) == offset for d in (match, previous, previous - _WINDOW)):
            return match
        tick = self._hourly_at_or_before(previous - _WINDOW)
        while (following := self._hourly_step(tick)) <= u:
            tick = following
        return tick


_FIXED_OFFSET_ZONES = re.compile(r"(Etc/)?(UTC|UCT|GMT|Universal|Zulu|GMT[+-]\d{1,2})")


def _even_ticks(fields: list[str], name: str, tz: Timezone | FixedTimezone) -> tuple[int, int] | None:
    """For "M H * * *" (daily) and "M * * * *" (hourly) in a zone whose UTC offset never changes: the first tick
    at or after 1970-01-01 UTC and the period, in microseconds. Other expressions and zones: None."""
    minute, hour, *rest = fields
    if rest != ["*", "*", "*"] or not minute.isdigit() or not (hour == "*" or hour.isdigit()):
        return None
    if not isinstance(tz, FixedTimezone) and not _FIXED_OFFSET_ZONES.fullmatch(name):
        return None
    offset = tz.utcoffset(dt.datetime(2000, 1, 1))
    if offset is None:
        return None
    period = (3_600 if hour == "*" else 86_400) * 1_000_000
    wall = (int(minute) * 60 + (0 if hour == "*" else int(hour) * 3_600)) * 1_000_000
    return (wall - int(offset.total_seconds() * 1_000_000)) % period, period


_TICKS: dict[tuple[str, str, DateTime, bool], DateTime] = {}  # (expression, timezone, t, forward) -> tick
_TICKS_KEPT = 20_000
_CRONS: dict[str, croniter] = {}  # parsed expressions; each _step resets the start before iterating


def _std_utc(d: DateTime) -> dt.datetime:
    return dt.datetime(d.year, d.month, d.day, d.hour, d.minute, d.second, d.microsecond, tzinfo=dt.UTC)


def _micros(d: dt.datetime) -> int:
    return calendar.timegm(d.utctimetuple()) * 1_000_000 + d.microsecond


def _from_micros(us: int) -> DateTime:
    return pendulum.instance(_EPOCH + dt.timedelta(microseconds=us)).in_timezone(_UTC)


@dataclass(frozen=True, slots=True)
class DeltaSchedule(_PeriodicSchedule):
    """Fixed-length intervals in UTC: ticks are anchor + k * delta (anchor = start_date)."""

    delta: dt.timedelta
    anchor: DateTime | None = None
    timezone: str = "UTC"
    _step_us: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        delta = dt.timedelta(days=self.delta.days, seconds=self.delta.seconds, microseconds=self.delta.microseconds)
        if delta <= dt.timedelta(0):
            raise ScheduleError(f"invalid timedelta schedule {delta}: it must be positive")
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "_step_us", delta // _TINY)
        if self.anchor is not None:
            object.__setattr__(self, "anchor", _utc(self.anchor, "start_date"))
        _load_timezone(self.timezone)

    def describe(self) -> dict[str, object]:
        seconds = self.delta.total_seconds()
        return {"type": "timedelta", "seconds": int(seconds) if seconds.is_integer() else seconds}

    def summary(self) -> str:
        return f"every {self.delta}"

    def _bind(self, start_date: DateTime) -> DeltaSchedule:
        return self if self.anchor is not None else DeltaSchedule(self.delta, start_date, self.timezone)

    def _tick(self, t: DateTime, forward: bool) -> DateTime:
        origin = 0 if self.anchor is None else _micros(self.anchor)
        offset = _micros(t) - origin
        k = offset // self._step_us + 1 if forward else -(-offset // self._step_us) - 1
        return _from_micros(origin + k * self._step_us)

    def interval_for(self, logical_date: DateTime) -> DataInterval:
        d = _utc(logical_date, "logical date")
        return DataInterval(d, d + self.delta)


class _AperiodicSchedule(Schedule):
    """At most one scheduled interval, [start_date, start_date]; manual dates get [d, d]."""

    __slots__ = ()

    def __post_init__(self) -> None:
        _load_timezone(self.timezone)

    def intervals_between(
        self, earliest: DateTime, latest: DateTime, *, start_date: DateTime, end_date: DateTime | None
    ) -> list[DataInterval]:
        interval = self.next_interval(after=None, start_date=start_date, end_date=end_date)
        if interval is None or not _utc(earliest, "earliest") <= interval.start <= _utc(latest, "latest"):
            return []
        return [interval]

    def interval_for(self, logical_date: DateTime) -> DataInterval:
        d = _utc(logical_date, "logical date")
        return DataInterval(d, d)

    def is_tick(self, d: DateTime) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class OnceSchedule(_AperiodicSchedule):
    """@once: a single run with data interval [start_date, start_date], if none was scheduled yet."""

    timezone: str = "UTC"

    def describe(self) -> dict[str, object]:
        return {"type": "once"}

    def summary(self) -> str:
        return "@once"

    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        start = _utc(start_date, "start_date")
        if after is not None or (end_date is not None and start > _utc(end_date, "end_date")):
            return None
        return DataInterval(start, start)


@dataclass(frozen=True, slots=True)
class NoSchedule(_AperiodicSchedule):
    """None: runs only when triggered or signalled."""

    timezone: str = "UTC"

    def describe(self) -> dict[str, object]:
        return {"type": "none"}

    def summary(self) -> str:
        return "None"

    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        return None


def parse_schedule(
    value: str | dt.timedelta | Schedule | None, *, timezone: str = "UTC", start_date: DateTime | None = None
) -> Schedule:
    """Build a Schedule from a DAG's `schedule` argument; ScheduleError names a bad value.

    A Schedule instance is returned unchanged.
    """
    if isinstance(value, Schedule):
        return value
    if value is None:
        return NoSchedule(timezone=timezone)
    if isinstance(value, dt.timedelta):
        return DeltaSchedule(value, anchor=start_date, timezone=timezone)
    if isinstance(value, str):
        if value.strip().lower() == "@once":
            return OnceSchedule(timezone=timezone)
        return CronSchedule(value, timezone=timezone)
    raise ScheduleError(f"unsupported schedule {value!r}: expected a cron string, a preset, @once, a timedelta or None")


def _walk(
    schedule: Schedule, start_date: DateTime, end_date: DateTime | None, after: After
) -> Iterator[DataInterval]:
    interval = schedule.next_interval(after=after, start_date=start_date, end_date=end_date)
    while interval is not None:
        yield interval
        interval = schedule.next_interval(after=interval, start_date=start_date, end_date=end_date)


def due_intervals(
    schedule: Schedule,
    *,
    start_date: DateTime,
    end_date: DateTime | None,
    after: After,
    now: DateTime,
    catchup: bool,
    limit: int | None = None,
) -> list[DataInterval]:
    """Intervals to create by `now`, walking from `after`: those that have ended (end <= now).

    catchup: all of them, oldest first (at most `limit`); otherwise only the latest one, found by
    jumping back from `now` rather than walking (cheap even when `after` is years behind).
    """
    now = _utc(now, "now")
    if limit is not None and limit <= 0:
        return []
    if not catchup:
        latest = schedule._latest_due(start_date=start_date, end_date=end_date, after=after, now=now)
        return [] if latest is None else [latest]
    due = itertools.takewhile(lambda i: i.end <= now, _walk(schedule, start_date, end_date, after))
    return list(itertools.islice(due, limit))


def upcoming_intervals(
    schedule: Schedule, *, start_date: DateTime, end_date: DateTime | None, after: After, n: int
) -> list[DataInterval]:
    """The next `n` intervals of the schedule from `after`, due or not (the schedule's own walk; what the
    scheduler creates next is `next_scheduled`)."""
    return list(itertools.islice(_walk(schedule, start_date, end_date, after), max(n, 0)))


def next_scheduled(
    schedule: Schedule,
    *,
    start_date: DateTime,
    end_date: DateTime | None,
    after: After,
    now: DateTime,
    catchup: bool,
    held: Collection[dt.datetime] = (),
    n: int,
) -> list[DataInterval]:
    """The next `n` intervals the scheduler creates, in the order it creates them: first those due at `now`
    (every one since `after` with catchup, else only the latest: the scheduler fast-forwards), then the
    following ones, each when it falls due. Dates in `held` (a live manual run there) are skipped, as the
    scheduler skips them. The scheduler (scheduler/loop/scheduling.py) and `ledger dags next-runs` both use this:
    what next-runs prints is what the scheduler will do, unless the timeline or the DAG changes first."""
    if n <= 0:
        return []
    held = set(held)
    due = due_intervals(schedule, start_date=start_date, end_date=end_date, after=after, now=now, catchup=catchup,
                        limit=n + len(held))
    out = [i for i in due if i.logical_date not in held][:n]
    cursor: After = due[-1] if due else after
    for interval in _walk(schedule, start_date, end_date, cursor):
        if len(out) >= n:
            break
        if interval.logical_date not in held:
            out.append(interval)
    return out
