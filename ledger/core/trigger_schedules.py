"""Trigger schedules: runs at trigger times (cron ticks, fixed steps, listed events), each over [T - interval, T].

The schedules behind Airflow's ``CronTriggerTimetable``, ``MultipleCronTriggerTimetable``,
``DeltaTriggerTimetable`` and ``EventsTimetable`` (ledger/sdk/timetables.py), with Airflow's rules:

* A run is *triggered* at a time T of the schedule (a cron tick in the schedule's timezone, with the same DST
  rules as cron data intervals; start_date + k * delta; a listed event) and covers the data interval
  [T - interval, T] (``interval`` defaults to 0: the interval is the instant T). Its logical date is the
  interval's start; it is due at T, once its interval has ended, like every ledger run.
* The first trigger time is the first at or after ``start_date``; no trigger time is after ``end_date``.
* After a run whose interval ends at E, the next trigger time is the first strictly *after* E (Airflow's
  ``_get_next(last_automated_data_interval.end)``): a zero-length interval [T, T] is not created again.
* Without catchup, the latest trigger time at or before ``now`` (Airflow's ``_align_to_prev(now)``), as for
  every ledger schedule: only the latest due run.
* A run triggered by hand (or backfilled) at logical date d covers [d, d + interval]: the interval a
  scheduled run at that logical date has. (Airflow's ``infer_manual_data_interval(run_after=d)`` gives
  [d - interval, d]; ledger keys runs by the interval's start, so a manual run at d keeps the logical date
  d.) ``EventsTimetable(restrict_to_events=True)`` moves a manual run to the latest event at or before d.

Pure, like ledger/core/schedule.py: no clock, no I/O; every DateTime returned is aware and in UTC.
"""

from __future__ import annotations

import abc
import bisect
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

import pendulum
from pendulum import DateTime

from ledger.core.schedule import (
    After,
    CronSchedule,
    DataInterval,
    DeltaSchedule,
    Schedule,
    ScheduleError,
    _load_timezone,
    _utc,
    end_of,
)

__all__ = ["CronTriggerSchedule", "DeltaTriggerSchedule", "EventsSchedule", "TriggerSchedule"]

SUMMARY_MAX = 250  # the width of the runs' and DAGs' schedule column


def _seconds(delta: dt.timedelta) -> int | float:
    seconds = delta.total_seconds()
    return int(seconds) if seconds.is_integer() else seconds


def _short(text: str) -> str:
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


def check_interval(interval: object, what: str = "interval") -> dt.timedelta:
    if not isinstance(interval, dt.timedelta):
        raise ScheduleError(f"the {what} {interval!r} is not supported: give a datetime.timedelta")
    if interval < dt.timedelta(0):
        raise ScheduleError(f"the {what} {interval} is negative")
    return interval


class TriggerSchedule(Schedule):
    """Runs at trigger times T, each over [T - interval, T]. Subclasses say where the trigger times are."""

    __slots__ = ()
    interval: dt.timedelta

    @abc.abstractmethod
    def _next(self, t: DateTime, *, inclusive: bool) -> DateTime | None:
        """The first trigger time after t (at or after it with `inclusive`); None when there is none."""

    @abc.abstractmethod
    def _previous(self, t: DateTime) -> DateTime | None:
        """The last trigger time at or before t; None when there is none."""

    def _run(self, trigger: DateTime) -> DataInterval:
        return DataInterval(trigger - self.interval, trigger)

    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        trigger = self._next(_utc(start_date, "start_date"), inclusive=True)
        resume = end_of(after)
        if resume is not None and trigger is not None:
            following = self._next(resume, inclusive=False)
            trigger = None if following is None else max(trigger, following)
        if trigger is None or (end_date is not None and trigger > _utc(end_date, "end_date")):
            return None
        return self._run(trigger)

    def intervals_between(
        self, earliest: DateTime, latest: DateTime, *, start_date: DateTime, end_date: DateTime | None
    ) -> list[DataInterval]:
        last = _utc(latest, "latest") + self.interval
        if end_date is not None:
            last = min(last, _utc(end_date, "end_date"))
        trigger = self._next(max(_utc(earliest, "earliest") + self.interval, _utc(start_date, "start_date")),
                             inclusive=True)
        found: list[DataInterval] = []
        while trigger is not None and trigger <= last:
            found.append(self._run(trigger))
            trigger = self._next(trigger, inclusive=False)
        return found

    def interval_for(self, logical_date: DateTime) -> DataInterval:
        d = _utc(logical_date, "logical date")
        return DataInterval(d, d + self.interval)

    def is_tick(self, d: DateTime) -> bool:
        trigger = _utc(d, "date") + self.interval
        return self._next(trigger, inclusive=True) == trigger

    def _latest_due(
        self, *, start_date: DateTime, end_date: DateTime | None, after: After, now: DateTime
    ) -> DataInterval | None:
        first = self._first_due(start_date=start_date, end_date=end_date, after=after, now=now)
        if first is None:
            return None
        latest = self._previous(now if end_date is None else min(now, _utc(end_date, "end_date")))
        return self._run(latest if latest is not None and latest >= first.end else first.end)


@dataclass(frozen=True, slots=True)
class CronTriggerSchedule(TriggerSchedule):
    """Trigger times: the ticks of one or more 5-field crons on the wall clock of `timezone` (one run when
    several crons tick at once). `run_immediately` is recorded: it matters only to a DAG without a start_date,
    which a scheduled ledger DAG always has."""

    expressions: tuple[str, ...]
    timezone: str = "UTC"
    interval: dt.timedelta = dt.timedelta(0)
    run_immediately: bool | float | None = False
    _crons: tuple[CronSchedule, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.expressions:
            raise ScheduleError("a cron trigger schedule needs at least one cron expression")
        crons = tuple(CronSchedule(e, timezone=self.timezone) for e in self.expressions)
        object.__setattr__(self, "_crons", crons)
        object.__setattr__(self, "expressions", tuple(c.preset or c.expression for c in crons))
        object.__setattr__(self, "interval", check_interval(self.interval))

    def describe(self) -> dict[str, object]:
        return {"type": "cron_trigger", "expressions": list(self.expressions), "timezone": self.timezone,
                "interval": _seconds(self.interval), "run_immediately": self.run_immediately}

    def summary(self) -> str:
        text = "trigger " + ", ".join(self.expressions)
        return _short(text if not self.interval else f"{text} over {self.interval}")

    def _next(self, t: DateTime, *, inclusive: bool) -> DateTime:
        return min(c._at_or_after(t) if inclusive else c._after(t) for c in self._crons)

    def _previous(self, t: DateTime) -> DateTime:
        return max(c._at_or_before(t) for c in self._crons)


@dataclass(frozen=True, slots=True)
class DeltaTriggerSchedule(TriggerSchedule):
    """Trigger times: start_date + k * delta (Airflow continues from the previous run's trigger time, which is
    the same while the schedule does not change)."""

    delta: dt.timedelta
    anchor: DateTime | None = None
    interval: dt.timedelta = dt.timedelta(0)
    timezone: str = "UTC"
    _steps: DeltaSchedule = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_steps", DeltaSchedule(check_interval(self.delta, "delta"), self.anchor,
                                                         self.timezone))
        object.__setattr__(self, "interval", check_interval(self.interval))

    def describe(self) -> dict[str, object]:
        return {"type": "delta_trigger", "seconds": _seconds(self._steps.delta), "interval": _seconds(self.interval)}

    def summary(self) -> str:
        text = f"trigger every {self._steps.delta}"
        return text if not self.interval else f"{text} over {self.interval}"

    def _next(self, t: DateTime, *, inclusive: bool) -> DateTime:
        return self._steps._at_or_after(t) if inclusive else self._steps._after(t)

    def _previous(self, t: DateTime) -> DateTime:
        return self._steps._at_or_before(t)

    def next_interval(
        self, *, after: After, start_date: DateTime, end_date: DateTime | None
    ) -> DataInterval | None:
        if self.anchor is None:  # anchored at the start date it is given, like DeltaSchedule
            bound = DeltaTriggerSchedule(self.delta, _utc(start_date, "start_date"), self.interval, self.timezone)
            return bound.next_interval(after=after, start_date=start_date, end_date=end_date)
        return TriggerSchedule.next_interval(self, after=after, start_date=start_date, end_date=end_date)


@dataclass(frozen=True, slots=True)
class EventsSchedule(TriggerSchedule):
    """Trigger times: a finite list of instants; each run covers [event, event]. `restrict_to_events`: a
    manual run moves to the latest event at or before its date (the first event when all are later)."""

    events: tuple[DateTime, ...]
    restrict_to_events: bool = False
    description: str | None = None
    timezone: str = "UTC"
    interval: dt.timedelta = field(default=dt.timedelta(0), init=False)

    def __post_init__(self) -> None:
        events = sorted({_utc(e, "event date") for e in self.events})
        object.__setattr__(self, "events", tuple(events))
        _load_timezone(self.timezone)

    def describe(self) -> dict[str, object]:
        return {"type": "events", "events": [e.isoformat() for e in self.events],
                "restrict_to_events": self.restrict_to_events, "description": self.description}

    def summary(self) -> str:
        return _short(self.description or f"{len(self.events)} events")

    def _next(self, t: DateTime, *, inclusive: bool) -> DateTime | None:
        at = (bisect.bisect_left if inclusive else bisect.bisect_right)(self.events, t)
        return self.events[at] if at < len(self.events) else None

    def _previous(self, t: DateTime) -> DateTime | None:
        at = bisect.bisect_right(self.events, t)
        return self.events[at - 1] if at else None

    def interval_for(self, logical_date: DateTime) -> DataInterval:
        d = _utc(logical_date, "logical date")
        if self.restrict_to_events and self.events:
            d = self._previous(d) or self.events[0]
        return DataInterval(d, d)


def events_from(values: Sequence[str]) -> tuple[DateTime, ...]:
    """The events of a description (ISO texts)."""
    parsed = []
    for v in values:
        moment = pendulum.parse(v)
        if not isinstance(moment, DateTime):
            raise ScheduleError(f"invalid event date {v!r}")
        parsed.append(moment)
    return tuple(parsed)
