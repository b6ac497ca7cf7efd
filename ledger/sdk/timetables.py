"""Airflow's Timetable protocol in ledger: its value types, its built-in timetables, and custom timetables.

* ``DataInterval``, ``TimeRestriction``, ``DagRunInfo``: Airflow's named tuples (``airflow.timetables.base``).
* ``Timetable``: the base class of a custom timetable, as in Airflow: ``next_dagrun_info(*,
  last_automated_data_interval, restriction)``, ``infer_manual_data_interval(*, run_after)``, ``serialize()``
  / ``deserialize(data)``, ``summary``, ``description``, ``validate()``.
* Airflow's own timetables (``CronTriggerTimetable``, ``MultipleCronTriggerTimetable``,
  ``DeltaTriggerTimetable``, ``EventsTimetable``, ``CronDataIntervalTimetable``,
  ``DeltaDataIntervalTimetable``, ``NullTimetable``, ``OnceTimetable``) are ledger schedules underneath
  (ledger/core/schedule.py, ledger/core/trigger_schedules.py): pure, no clock read.
* ``TimetableSchedule``: a custom timetable behind ledger's Schedule interface, so that the scheduler, ``ledger
  dags next-runs`` and backfill plan with it as with any schedule. The version records the timetable as
  ``{"type": "timetable", "class": "module.Class", "data": <its serialize()>}``; a pinned version rebuilds it
  with ``Class.deserialize(data)``. A class from a module of the DAGs folder is pinned with the version: that
  module is part of the version's code, the description names its file (``"module_file"``), and where the
  planning happens the class is loaded from the version's copy of the module (``pinned``: its text, read with
  the version), never from the live folder. Any other class is imported by its module path there (an installed
  package or a folder on PYTHONPATH, as Airflow's plugins folder); a class defined in the DAG file itself is
  refused when the file is parsed (scheduler/runtime/dagbag.py).

How ledger calls a custom timetable (decision 171): ``next_dagrun_info`` with ``last_automated_data_interval``
= the latest live scheduled or backfill run's data interval (None for the first) and ``TimeRestriction(
earliest=start_date, latest=end_date, catchup=True)``; without catchup, ledger walks to the latest interval due
by ``now`` itself, as for every schedule (the timetable is not asked with ``catchup=False``, so it never has to
read the clock). A run is due when its data interval has ended (``run_after`` of every Airflow timetable is its
interval's end). A manual run at date d gets ``infer_manual_data_interval(run_after=d)``; its logical date is
that interval's start.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib
import json
import os
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pendulum
from pendulum import DateTime

from ledger import airflow_compat
from ledger.core import schedule as sched
from ledger.core.schedule import After, Schedule, ScheduleError, parse_schedule
from ledger.core.trigger_schedules import (
    CronTriggerSchedule,
    DeltaTriggerSchedule,
    EventsSchedule,
    check_interval,
    events_from,
)
from ledger.core.versions import schedule_from_description

__all__ = [
    "CronDataIntervalTimetable", "CronTriggerTimetable", "DagRunInfo", "DataInterval", "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable", "EventsTimetable", "MultipleCronTriggerTimetable", "NullTimetable", "OnceTimetable",
    "TimeRestriction", "Timetable", "TimetableSchedule", "from_description", "to_schedule",
]  # fmt: skip

_WALK_LIMIT = 100_000  # calls of a custom timetable in one walk: a timetable that never ends is stopped


class DataInterval(NamedTuple):
    """Airflow's data interval: [start, end], both aware."""

    start: DateTime
    end: DateTime

    @classmethod
    def exact(cls, at: DateTime) -> DataInterval:
        return cls(at, at)


class TimeRestriction(NamedTuple):
    """When a run may be scheduled: not before `earliest` (the start_date), not after `latest` (end_date)."""

    earliest: DateTime | None
    latest: DateTime | None
    catchup: bool


class DagRunInfo(NamedTuple):
    """What a timetable answers: when the run may start and the interval it covers."""

    run_after: DateTime
    data_interval: DataInterval

    @classmethod
    def exact(cls, at: DateTime) -> DagRunInfo:
        return cls(at, DataInterval.exact(at))

    @classmethod
    def interval(cls, start: DateTime, end: DateTime) -> DagRunInfo:
        return cls(end, DataInterval(start, end))

    @property
    def logical_date(self) -> DateTime:
        return self.data_interval.start


class Timetable:
    """Base class of a timetable (Airflow's protocol). Subclass it and implement `next_dagrun_info` and
    `infer_manual_data_interval`; `serialize`/`deserialize` when it has arguments."""

    description: str = ""
    periodic: bool = True
    can_be_scheduled: bool = True
    run_ordering: tuple[str, ...] = ("data_interval_end", "logical_date")
    active_runs_limit: int | None = None

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls()

    def serialize(self) -> dict[str, Any]:
        return {}

    def validate(self) -> None:
        return None

    @property
    def summary(self) -> str:
        return type(self).__name__

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        raise NotImplementedError

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        raise NotImplementedError


# -- Airflow's timetables, as ledger schedules ---------------------------------------------------------------

def _zone_name(timezone: object) -> str:
    if isinstance(timezone, str):
        return timezone
    name = getattr(timezone, "name", None) or getattr(timezone, "key", None)
    return str(name) if name else str(timezone)


class _ScheduleTimetable(Timetable):
    """An Airflow timetable that is a ledger schedule underneath; its protocol methods answer from it."""

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        raise NotImplementedError

    def serialize(self) -> dict[str, Any]:
        return self.ledger_schedule(timezone="UTC", start_date=None).describe()

    @property
    def summary(self) -> str:
        return self.ledger_schedule(timezone="UTC", start_date=None).summary()

    def _bound(self, earliest: DateTime | None) -> tuple[Schedule, DateTime]:
        start = sched._utc(earliest, "earliest") if earliest is not None else pendulum.datetime(1970, 1, 1)
        return self.ledger_schedule(timezone="UTC", start_date=start), start

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        schedule, start = self._bound(restriction.earliest)
        last = last_automated_data_interval
        found = schedule.next_interval(after=None if last is None else sched.DataInterval(last.start, last.end),
                                       start_date=start, end_date=restriction.latest)
        return None if found is None else DagRunInfo.interval(found.start, found.end)

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        found = self._bound(None)[0].interval_for(run_after)
        return DataInterval(found.start, found.end)


class CronTriggerTimetable(_ScheduleTimetable):
    def __init__(self, cron: str, *, timezone: object = "UTC", interval: dt.timedelta = dt.timedelta(),
                 run_immediately: bool | dt.timedelta = False) -> None:
        self._schedule = CronTriggerSchedule((cron,), _zone_name(timezone), check_interval(interval),
                                             _immediately(run_immediately))
        self.description = f"cron trigger {cron}"

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return self._schedule


class MultipleCronTriggerTimetable(_ScheduleTimetable):
    def __init__(self, *crons: str, timezone: object = "UTC", interval: dt.timedelta = dt.timedelta(),
                 run_immediately: bool | dt.timedelta = False) -> None:
        if not crons:
            raise ScheduleError("MultipleCronTriggerTimetable needs at least one cron expression")
        self._schedule = CronTriggerSchedule(tuple(crons), _zone_name(timezone), check_interval(interval),
                                             _immediately(run_immediately))
        self.description = ", ".join(crons)

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return self._schedule


class DeltaTriggerTimetable(_ScheduleTimetable):
    def __init__(self, delta: dt.timedelta, *, interval: dt.timedelta = dt.timedelta()) -> None:
        self._delta = check_interval(delta, "delta")
        self._interval = check_interval(interval)
        if not delta:
            raise ScheduleError("DeltaTriggerTimetable: the delta must be positive")
        self.description = f"every {delta}"

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return DeltaTriggerSchedule(self._delta, start_date, self._interval, timezone)


class EventsTimetable(_ScheduleTimetable):
    def __init__(self, event_dates: Iterable[dt.datetime], restrict_to_events: bool = False,
                 presorted: bool = False, description: str | None = None) -> None:
        # a naive event is read as UTC, as Airflow's default timezone reads a naive start_date
        events = tuple(pendulum.instance(d if d.tzinfo else d.replace(tzinfo=dt.UTC)) for d in event_dates)
        self._schedule = EventsSchedule(events, restrict_to_events, description)
        self.event_dates = list(self._schedule.events)
        self.restrict_to_events = restrict_to_events
        self.description = description or self._schedule.summary()

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return self._schedule


class CronDataIntervalTimetable(_ScheduleTimetable):
    def __init__(self, cron: str, timezone: object = "UTC") -> None:
        self._schedule = sched.CronSchedule(cron, timezone=_zone_name(timezone))

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return self._schedule


class DeltaDataIntervalTimetable(_ScheduleTimetable):
    def __init__(self, delta: dt.timedelta) -> None:
        self._delta = check_interval(delta, "delta")

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return sched.DeltaSchedule(self._delta, anchor=start_date, timezone=timezone)


class NullTimetable(_ScheduleTimetable):
    periodic = False
    can_be_scheduled = False

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return sched.NoSchedule(timezone=timezone)


class OnceTimetable(_ScheduleTimetable):
    periodic = False

    def ledger_schedule(self, *, timezone: str, start_date: DateTime | None) -> Schedule:
        return sched.OnceSchedule(timezone=timezone)


def _immediately(value: bool | dt.timedelta | None) -> bool | float | None:
    return value.total_seconds() if isinstance(value, dt.timedelta) else value


# -- a custom timetable behind the Schedule interface ----------------------------------------------------------

def class_path(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_class(path: str) -> type:
    airflow_compat.install()  # a timetable written for Airflow imports `airflow.timetables.base`
    module_name, _, qualname = path.rpartition(".")
    for split in range(path.count("."), 0, -1):  # nested classes: the longest importable module prefix wins
        module_name = ".".join(path.split(".")[:split])
        qualname = ".".join(path.split(".")[split:])
        try:
            value: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for part in qualname.split("."):
                value = getattr(value, part)
        except AttributeError:
            break
        if isinstance(value, type):
            return value
        break
    raise ScheduleError(f"the timetable class {path} cannot be imported here: put its module where the scheduler "
                        "and the ledger command import it (an installed package, or a folder on PYTHONPATH)")


@dataclass(frozen=True, slots=True)
class TimetableSchedule(Schedule):
    """A custom timetable (Airflow's protocol) as a ledger Schedule. Built from the object itself (parsing a
    DAG file) or from its class path and serialized data (a version's structure; imported on first use)."""

    class_path: str
    data: dict[str, Any]
    timezone: str = "UTC"
    timetable: Any = field(default=None, compare=False)
    module_file: str | None = None  # the class's module in the DAGs folder (relative path): pinned with the version
    source: str | None = field(default=None, compare=False)  # the version's copy of that module (see `pinned`)

    def __post_init__(self) -> None:
        try:
            json.dumps(self.data, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"timetable {self.class_path}: serialize() must return JSON-able data ({exc})") \
                from None

    def pinned(self, source: str) -> TimetableSchedule:
        """This schedule with the version's copy of its class's module, from which the class is then loaded."""
        return dataclasses.replace(self, source=source)

    def _table(self) -> Any:
        if self.timetable is None:
            cls = _import_class(self.class_path) if self.module_file is None else self._pinned_class()
            try:
                table = cls.deserialize(self.data)  # type: ignore[attr-defined]
            except Exception as exc:
                raise ScheduleError(f"timetable {self.class_path}: deserialize() failed: {exc}") from None
            object.__setattr__(self, "timetable", table)
        return self.timetable

    def _call(self, what: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._table(), what)(**kwargs)
        except ScheduleError:
            raise
        except Exception as exc:
            raise ScheduleError(f"timetable {self.class_path}: {what}() failed: {type(exc).__name__}: {exc}") \
                from None

    def _interval(self, value: Any, what: str) -> sched.DataInterval:
        try:
            start, end = value
            return sched.DataInterval(sched._utc(start, f"{what} start"), sched._utc(end, f"{what} end"))
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"timetable {self.class_path}: {what} is not a data interval: {exc}") from None

    def _pinned_class(self) -> type:
        """The class from the version's copy of its module, executed once per distinct text as a module of its own
        (`ledger_pinned_<digest>`), so that two versions' copies never meet in sys.modules."""
        assert self.module_file is not None
        if self.source is None:
            raise ScheduleError(f"timetable {self.class_path}: the version's copy of {self.module_file} was not "
                                "read with the version")
        module_name = module_of(self.module_file)
        name = "ledger_pinned_" + hashlib.sha256(self.source.encode()).hexdigest()[:16]
        module = sys.modules.get(name)
        if module is None:
            airflow_compat.install()
            module = types.ModuleType(name)
            module.__file__ = f"<{self.module_file}, as the DAG version pins it>"
            sys.modules[name] = module
            try:
                exec(compile(self.source, module.__file__, "exec"), module.__dict__)
            except Exception as exc:
                del sys.modules[name]
                raise ScheduleError(f"timetable {self.class_path}: its pinned module {self.module_file} fails: "
                                    f"{type(exc).__name__}: {exc}") from None
        value: Any = module
        try:
            for part in self.class_path[len(module_name) + 1:].split("."):
                value = getattr(value, part)
        except AttributeError:
            raise ScheduleError(f"timetable {self.class_path}: not in the pinned {self.module_file}") from None
        return value  # type: ignore[no-any-return]

    def describe(self) -> dict[str, object]:
        pinned = {"module_file": self.module_file} if self.module_file is not None else {}
        return {"type": "timetable", "class": self.class_path, "data": self.data, **pinned}

    def summary(self) -> str:
        try:
            text = self._table().summary
        except ScheduleError:
            text = self.class_path.rpartition(".")[2]
        return str(text)[:250]

    def _info(self, last: After, earliest: DateTime, latest: DateTime | None) -> sched.DataInterval | None:
        if isinstance(last, sched.DataInterval):
            last = sched.DataInterval(sched._utc(last.start, "after"), sched._utc(last.end, "after"))
        elif last is not None:
            last = sched.DataInterval(sched._utc(last, "after"), sched._utc(last, "after"))  # only its end is known
        info = self._call("next_dagrun_info",
                          last_automated_data_interval=None if last is None else DataInterval(last.start, last.end),
                          restriction=TimeRestriction(sched._utc(earliest, "start_date"), latest, True))
        if info is None:
            return None
        found = self._interval(info.data_interval, "next_dagrun_info()'s data_interval")
        if last is not None and found.start <= last.start:
            raise ScheduleError(f"timetable {self.class_path}: next_dagrun_info() after {last.start.isoformat()} "
                                f"returned {found.start.isoformat()}, which does not move forward")
        return found

    def next_interval(self, *, after: After, start_date: DateTime, end_date: DateTime | None
                      ) -> sched.DataInterval | None:
        found = self._info(after, start_date, end_date)
        if found is None or (end_date is not None and found.start > end_date):
            return None
        return found

    def intervals_between(self, earliest: DateTime, latest: DateTime, *, start_date: DateTime,
                          end_date: DateTime | None) -> list[sched.DataInterval]:
        found: list[sched.DataInterval] = []
        lower = max(sched._utc(earliest, "earliest"), sched._utc(start_date, "start_date"))
        upper = sched._utc(latest, "latest") if end_date is None else min(latest, end_date)
        interval = self._info(None, lower, end_date)
        while interval is not None and interval.start <= upper:
            found.append(interval)
            if len(found) > _WALK_LIMIT:
                raise ScheduleError(f"timetable {self.class_path}: more than {_WALK_LIMIT} intervals in range")
            interval = self._info(interval, lower, end_date)
        return found

    def interval_for(self, logical_date: DateTime) -> sched.DataInterval:
        run_after = sched._utc(logical_date, "logical date")
        return self._interval(self._call("infer_manual_data_interval", run_after=run_after),
                              "infer_manual_data_interval()")

    def is_tick(self, d: DateTime) -> bool:
        return self.interval_for(d).start == sched._utc(d, "date")


def to_schedule(value: object, *, timezone: str, start_date: DateTime | None) -> Schedule:
    """A DAG's `schedule` argument as a ledger Schedule: what parse_schedule reads, or a timetable."""
    if isinstance(value, _ScheduleTimetable):
        return value.ledger_schedule(timezone=timezone, start_date=start_date)
    if callable(getattr(value, "next_dagrun_info", None)) and not isinstance(value, Schedule):
        validate = getattr(value, "validate", None)
        if callable(validate):
            try:
                validate()
            except Exception as exc:
                raise ScheduleError(f"timetable {class_path(value)} is invalid: {exc}") from None
        serialize = getattr(value, "serialize", None)
        data = serialize() if callable(serialize) else {}
        return TimetableSchedule(class_path(value), data, timezone, value)
    return parse_schedule(value, timezone=timezone, start_date=start_date)  # type: ignore[arg-type]


def from_description(desc: dict[str, Any], *, timezone: str, start_date: DateTime) -> Schedule | None:
    """The schedule a version's structure records, for the kinds of this module (None: another kind)."""
    kind = desc.get("type")
    if kind == "cron_trigger":
        immediately = desc.get("run_immediately", False)
        return CronTriggerSchedule(tuple(desc["expressions"]), str(desc["timezone"]),
                                   dt.timedelta(seconds=float(desc.get("interval", 0))), immediately)
    if kind == "delta_trigger":
        return DeltaTriggerSchedule(dt.timedelta(seconds=float(desc["seconds"])), start_date,
                                    dt.timedelta(seconds=float(desc.get("interval", 0))), timezone)
    if kind == "events":
        return EventsSchedule(events_from(desc["events"]), bool(desc.get("restrict_to_events")),
                              desc.get("description"))
    if kind == "timetable":
        module_file = desc.get("module_file")
        return TimetableSchedule(str(desc["class"]), dict(desc.get("data") or {}), timezone,
                                 module_file=str(module_file) if module_file is not None else None)
    return None


def module_of(relpath: str) -> str:
    """The import name of a module of the DAGs folder from its path there: `plugins/workday.py` ->
    `plugins.workday` (a package's `__init__.py`: the package)."""
    parts = relpath.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def home_problem(schedule: Schedule, root: str, dag_module_prefix: str) -> str | None:
    """Why a custom timetable's class cannot be planned with (None: it can): defined in the DAG file. A class from
    a module of the DAGs folder `root` is pinned with the version instead: its schedule records the module's
    path (its text is read with the version where the planning happens)."""
    if not isinstance(schedule, TimetableSchedule):
        return None
    module_name = type(schedule.timetable).__module__
    module = sys.modules.get(module_name)
    where = getattr(module, "__file__", None) or ""
    if module_name.startswith(dag_module_prefix) or module_name == "__main__":
        return (f"the timetable class {type(schedule.timetable).__qualname__} is defined in the DAG file; the "
                "scheduler cannot import a DAG file: move it to a module of the DAGs folder (pinned with the "
                "DAG's version), on PYTHONPATH (as Airflow's plugins folder) or in an installed package")
    inside = os.path.abspath(root) + os.sep
    if where and os.path.abspath(where).startswith(inside):
        relpath = os.path.relpath(os.path.abspath(where), os.path.abspath(root)).replace(os.sep, "/")
        if module_of(relpath) != module_name:
            return (f"the timetable class {type(schedule.timetable).__qualname__} comes from {where}, imported as "
                    f"{module_name}: import it by its path in the DAGs folder ({module_of(relpath)})")
        object.__setattr__(schedule, "module_file", relpath)
    return None


def read_schedule(desc: dict[str, Any], *, timezone: str, start_date: DateTime) -> Schedule:
    """A stored schedule description read back, the custom timetables of this module included (what the documents
    show; reading a schedule back needs neither the authoring API nor its templates)."""
    return schedule_from_description(desc, timezone=timezone, start_date=start_date, timetables=from_description)
