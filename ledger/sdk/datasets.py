"""Datasets (Airflow's `Dataset`, 3.x's `Asset`): outlets and inlets of tasks, the conditions a DAG is scheduled
on, and time partitions.

Pure: the names a DAG file uses, their JSON form (part of the DAG version), condition evaluation and partition
maths. What is stored (dataset events, what each run consumed) is ledger/store/datasets.py; run creation is
scheduler/loop/dataset_runs.py.

A dataset is named by its key: a Dataset's uri, an Asset's name. A partitioned dataset has one partition per
interval of a schedule in a time zone (`TimePartitions("hourly", timezone="Europe/Berlin")`): the DST day of an
hourly dataset has 23 or 25 partitions, as an hourly schedule has 23 or 25 runs. A partition's key is its start in
the dataset's time zone: `2024-03-02` for daily and coarser partitions, `2024-10-27T02:00+02:00` for finer ones
(the offset tells the two 02:00 hours of a fall-back day apart).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pendulum
from pendulum import DateTime

from ledger.core.errors import LedgerError
from ledger.core.schedule import DataInterval, Schedule, ScheduleError, parse_schedule

UPSTREAM_REWRITE = ("mark", "rerun")  # a consumer DAG's `on_upstream_rewrite`
GRAINS = {"hourly": "@hourly", "daily": "@daily", "weekly": "@weekly", "monthly": "@monthly", "yearly": "@yearly"}
_EPOCH = pendulum.datetime(1970, 1, 1, tz="UTC")


class DatasetError(LedgerError, ValueError):
    """A dataset, condition or partition that cannot be used; the message names it."""


# -- partitions ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimePartitions:
    """A dataset partitioned by time: one partition per interval of `every` (hourly, daily, weekly, monthly,
    yearly, or a cron expression) in `timezone`."""

    every: str = "daily"
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        self.schedule  # noqa: B018 (refuse a bad value when the dataset is declared)

    @property
    def schedule(self) -> Schedule:
        return _schedule(self.every, self.timezone)

    def describe(self) -> dict[str, str]:
        return {"every": self.every, "timezone": self.timezone}

    def key(self, start: dt.datetime) -> str:
        """The key of the partition starting at `start`."""
        local = pendulum.instance(start).in_timezone(self.timezone)
        return local.date().isoformat() if _by_day(self.every, self.timezone) else local.isoformat(timespec="minutes")

    def interval(self, key: str) -> DataInterval:
        """The interval of the partition named `key` (a partition key or any time inside the partition)."""
        try:
            if len(key) == 10:
                at = pendulum.parse(key, tz=self.timezone)
            else:
                at = pendulum.instance(dt.datetime.fromisoformat(key))
        except (ValueError, TypeError, pendulum.parsing.exceptions.ParserError):
            raise DatasetError(f"{key!r} is not a partition of {self.every} partitions in {self.timezone}: give "
                               "a date (2024-03-02) or a time with its offset (2024-03-02T05:00+01:00)") from None
        if not isinstance(at, DateTime) or at.tzinfo is None:
            raise DatasetError(f"{key!r} is not a point in time")
        return self.schedule.interval_for(at.in_timezone("UTC"))

    def normal(self, key: str) -> str:
        """`key` in canonical form (a lineage write may say `2024-03-02T00:00:00+00:00` for `2024-03-02`)."""
        return self.key(self.interval(key).start)

    def within(self, start: dt.datetime, end: dt.datetime) -> list[str]:
        """The keys of the partitions that start in [start, end) (the partition holding `start` when the range
        is empty, as a manual run's data interval is)."""
        s, e = pendulum.instance(start), pendulum.instance(end)
        keys = [k for _start, k in self.starting(s, e)]
        return keys or [self.key(self.schedule.interval_for(s).start)]

    def starting(self, start: dt.datetime, end: dt.datetime) -> list[tuple[DateTime, str]]:
        """(start, key) of the partitions that start in [start, end), oldest first."""
        s, e = pendulum.instance(start), pendulum.instance(end)
        if e <= s:
            return []
        return [(i.start, self.key(i.start)) for i in self.schedule.intervals_between(s, e, start_date=_EPOCH,
                                                                                       end_date=None) if i.start < e]


@functools.lru_cache(maxsize=64)
def _schedule(every: str, timezone: str) -> Schedule:
    """The schedule of a partitioning (built once: parsing a cron expression costs more than using it)."""
    try:
        return parse_schedule(GRAINS.get(every, every), timezone=timezone, start_date=_EPOCH)
    except ScheduleError as exc:
        raise DatasetError(f"partitions every {every!r} in {timezone!r}: {exc}") from None


@functools.lru_cache(maxsize=64)
def _by_day(every: str, timezone: str) -> bool:
    """Whether partitions are a day or longer (keyed by their local date)."""
    first = _schedule(every, timezone).interval_for(_EPOCH.add(days=40))
    return first.end - first.start >= dt.timedelta(hours=23)


def partitions_from(data: Mapping[str, Any] | None) -> TimePartitions | None:
    return None if not data else TimePartitions(str(data["every"]), str(data["timezone"]))


# -- datasets, aliases, conditions --------------------------------------------------------------------------


class Condition:
    """Something a DAG can be scheduled on: a dataset, an alias, or `a & b` / `a | b` of them."""

    def __and__(self, other: Condition) -> Condition:
        return AllOf(self, other)

    def __or__(self, other: Condition) -> Condition:
        return AnyOf(self, other)

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def leaves(self) -> Iterable[Condition]:
        yield self


class Dataset(Condition):
    """Airflow 2's `Dataset(uri, extra=None)`: named by its uri. `partitions`: a TimePartitions."""

    def __init__(self, uri: str, extra: Mapping[str, Any] | None = None, *,
                 partitions: TimePartitions | str | None = None) -> None:
        self._init(uri, uri, extra, partitions)

    def _init(self, key: str, uri: str, extra: Mapping[str, Any] | None,
              partitions: TimePartitions | str | None) -> None:
        if not isinstance(key, str) or not key.strip():
            raise DatasetError(f"a dataset needs a non-empty name or uri, not {key!r}")
        self.key, self.uri, self.extra = key, uri, dict(extra or {})
        self.partitions = TimePartitions(partitions) if isinstance(partitions, str) else partitions

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.key, "uri": self.uri,
                **({"partitions": self.partitions.describe()} if self.partitions else {})}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dataset) and other.key == self.key

    def __hash__(self) -> int:
        return hash(("dataset", self.key))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"


class Asset(Dataset):
    """Airflow 3's `Asset(name=None, uri=None, *, group='asset', extra=None, watchers=())`: named by its name;
    either defaults to the other."""

    def __init__(self, name: str | None = None, uri: str | None = None, *, group: str = "asset",
                 extra: Mapping[str, Any] | None = None, watchers: Sequence[Any] = (),
                 partitions: TimePartitions | str | None = None) -> None:
        name = name or uri
        if not name:
            raise DatasetError("an Asset needs a name or a uri")
        self.group, self.name = group, name
        self._init(name, uri or name, extra, partitions)


class DatasetAlias(Condition):
    """Airflow's `DatasetAlias(name)` (`AssetAlias(name, group='asset')`): a task adds the datasets it wrote to the
    alias at run time (`context.outlet_events[alias].add(Dataset(...))`); a DAG scheduled on the alias runs on
    those events."""

    def __init__(self, name: str, group: str = "asset") -> None:
        if not isinstance(name, str) or not name.strip():
            raise DatasetError(f"an alias needs a non-empty name, not {name!r}")
        self.name, self.group = name, group

    def to_json(self) -> dict[str, Any]:
        return {"alias": self.name}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetAlias) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("alias", self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


AssetAlias = DatasetAlias


class _Compound(Condition):
    word = ""

    def __init__(self, *objects: Condition) -> None:
        if not objects:
            raise DatasetError(f"{type(self).__name__} needs at least one dataset")
        for o in objects:
            if not isinstance(o, Condition):
                raise DatasetError(f"{type(self).__name__}: {o!r} is not a dataset, alias or condition")
        self.objects = objects

    def to_json(self) -> dict[str, Any]:
        return {self.word: [o.to_json() for o in self.objects]}

    def leaves(self) -> Iterable[Condition]:
        for o in self.objects:
            yield from o.leaves()

    def __repr__(self) -> str:
        return f" {'&' if self.word == 'all' else '|'} ".join(map(repr, self.objects)).join("()")


class AllOf(_Compound):
    """`a & b` (Airflow's DatasetAll / AssetAll): every one has a new event."""

    word = "all"


class AnyOf(_Compound):
    """`a | b` (Airflow's DatasetAny / AssetAny): any one has a new event."""

    word = "any"


DatasetAll = AssetAll = AllOf
DatasetAny = AssetAny = AnyOf


class DatasetOrTimeSchedule:
    """Airflow's `DatasetOrTimeSchedule(timetable=..., datasets=...)`: runs on the time schedule and also
    whenever the datasets' condition is met. `timetable`: a cron string, a preset or a timedelta."""

    def __init__(self, *, timetable: Any, datasets: Condition | Sequence[Dataset]) -> None:
        self.timetable = timetable
        self.condition = as_condition(datasets)


class AssetOrTimeSchedule(DatasetOrTimeSchedule):
    """Airflow 3's `AssetOrTimeSchedule(timetable=..., assets=...)`."""

    def __init__(self, *, timetable: Any, assets: Condition | Sequence[Dataset]) -> None:
        super().__init__(timetable=timetable, datasets=assets)


def as_condition(value: Any) -> Condition:
    """A DAG's dataset schedule as a Condition: a list of datasets means all of them (as in Airflow)."""
    if isinstance(value, Condition):
        return value
    if isinstance(value, (list, tuple, set, frozenset)) and value:
        items = list(value)
        for item in items:
            if not isinstance(item, Condition):
                raise DatasetError(f"schedule: {item!r} is not a dataset, alias or condition")
        return items[0] if len(items) == 1 else AllOf(*items)
    raise DatasetError(f"schedule: {value!r} is not a dataset condition")


def is_dataset_schedule(value: Any) -> bool:
    return isinstance(value, (Condition, DatasetOrTimeSchedule)) or (
        isinstance(value, (list, tuple, set, frozenset)) and bool(value)
        and all(isinstance(v, Condition) for v in value))


def check_condition(condition: Condition, *, where: str) -> None:
    """A condition over partitioned datasets must use one partitioning, and cannot mix in unpartitioned ones or
    aliases (a consumer run is one partition of all its inputs)."""
    leaves = list(condition.leaves())
    parts = {leaf.partitions for leaf in leaves if isinstance(leaf, Dataset) and leaf.partitions is not None}
    if not parts:
        return
    if len(parts) > 1:
        raise DatasetError(f"{where}: its partitioned datasets must share one partitioning, not "
                           + ", ".join(sorted(f"{p.every} in {p.timezone}" for p in parts)))
    odd = [leaf for leaf in leaves if not (isinstance(leaf, Dataset) and leaf.partitions is not None)]
    if odd:
        raise DatasetError(f"{where}: {odd[0]!r} is not partitioned, the other datasets are; schedule on "
                           "partitioned datasets only, or on unpartitioned ones only")


# -- conditions in their JSON form (the DAG version's) ------------------------------------------------------

def leaf_keys(cond: Mapping[str, Any]) -> list[str]:
    """The leaves of a JSON condition: `dataset:KEY` and `alias:NAME`, in order, each once."""
    found: list[str] = []

    def walk(c: Mapping[str, Any]) -> None:
        for word in ("all", "any"):
            if word in c:
                for sub in c[word]:
                    walk(sub)
                return
        leaf = f"dataset:{c['dataset']}" if "dataset" in c else f"alias:{c['alias']}"
        if leaf not in found:
            found.append(leaf)

    walk(cond)
    return found


def met(cond: Mapping[str, Any], present: Iterable[str] | set[str]) -> bool:
    """Whether a JSON condition holds when the leaves in `present` have what it waits for."""
    have = present if isinstance(present, set) else set(present)
    if "all" in cond:
        return all(met(c, have) for c in cond["all"])
    if "any" in cond:
        return any(met(c, have) for c in cond["any"])
    return (f"dataset:{cond['dataset']}" if "dataset" in cond else f"alias:{cond['alias']}") in have


def partitioning_of(cond: Mapping[str, Any]) -> TimePartitions | None:
    """The partitioning of a condition's datasets (check_condition has made it one), None if unpartitioned."""
    if "all" in cond or "any" in cond:
        for c in cond.get("all", cond.get("any", [])):
            found = partitioning_of(c)
            if found is not None:
                return found
        return None
    return partitions_from(cond.get("partitions"))


def describe(cond: Mapping[str, Any]) -> str:
    """`a & (b | c)`, for people."""
    if "all" in cond or "any" in cond:
        word = "all" if "all" in cond else "any"
        parts = [describe(c) for c in cond[word]]
        return parts[0] if len(parts) == 1 else "(" + (" & " if word == "all" else " | ").join(parts) + ")"
    return str(cond["dataset"]) if "dataset" in cond else f"alias {cond['alias']}"


def schedule_summary(time_summary: str, datasets: Mapping[str, Any] | None) -> str:
    """A DAG's schedule for people: `on sales_raw`, `@daily or on (a | b)`, or the time schedule alone."""
    if not datasets:
        return time_summary
    on = f"on {describe(datasets['condition'])}"
    return (on if time_summary == "None" else f"{time_summary} or {on}")[:250]


# -- pure rules of consumer runs ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class EventRow:
    """A stored dataset event, as the rules read it."""

    id: int
    dataset: str
    partition: str | None
    alias: str | None
    created_at: dt.datetime
    downstream: bool = False  # a rewrite that a `--downstream` backfill sends on to the consumers


def unpartitioned_trigger(cond: Mapping[str, Any], pending: Sequence[EventRow]) -> list[EventRow] | None:
    """The events an unpartitioned consumer's next run consumes (every pending event of its leaves), if its
    condition is met by them; None if it is not met yet. `pending`: the events each leaf has not consumed."""
    present = {f"dataset:{e.dataset}" for e in pending} | {f"alias:{e.alias}" for e in pending if e.alias}
    return sorted(pending, key=lambda e: e.id) if pending and met(cond, present) else None


def trigger_interval(consumed: Sequence[EventRow]) -> DataInterval:
    """An unpartitioned consumer run's data interval, as in Airflow: from its first to its last event."""
    times = [pendulum.instance(e.created_at) for e in consumed]
    return DataInterval(min(times), max(times))


def ready_partitions(cond: Mapping[str, Any], latest: Mapping[tuple[str, str], EventRow]) -> list[str]:
    """The partitions for which a partitioned consumer's condition holds, given the latest event of each
    (dataset, partition); oldest first by partition start is the caller's ordering."""
    by_part: dict[str, set[str]] = {}
    for (dataset, part) in latest:
        by_part.setdefault(part, set()).add(f"dataset:{dataset}")
    return [p for p, have in by_part.items() if met(cond, have)]


@dataclass(frozen=True, slots=True)
class Consumed:
    """An event a consumer run consumed."""

    run_id: int
    event: EventRow


@dataclass(frozen=True, slots=True)
class Stale:
    """A consumer run that read a partition since rewritten: `read` is the event it consumed, `by` the newest
    event of that partition (the write that made it stale)."""

    run_id: int
    read: EventRow
    by: EventRow


def stale_runs(consumed: Iterable[Consumed], latest: Mapping[tuple[str, str], EventRow]) -> list[Stale]:
    """The runs that consumed a partition's event when a newer one of that partition exists; a run stale on
    several inputs is listed once, with its newest cause."""
    found: dict[int, Stale] = {}
    for c in consumed:
        e = c.event
        if e.partition is None:
            continue  # an unpartitioned dataset's newer event is its next version, not a rewrite
        newest = latest.get((e.dataset, e.partition))
        if newest is not None and newest.id > e.id:
            prior = found.get(c.run_id)
            if prior is None or newest.id > prior.by.id:
                found[c.run_id] = Stale(c.run_id, e, newest)
    return sorted(found.values(), key=lambda s: s.run_id)


# -- the downstream plan ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Consumer:
    """A DAG scheduled on datasets: its condition's partitioned inputs and the datasets its tasks write."""

    dag_id: str
    inputs: frozenset[str]
    outputs: frozenset[str]
    partitions: TimePartitions | None


@dataclass(frozen=True, slots=True)
class DownstreamItem:
    dag_id: str
    partition: str
    logical_date: dt.datetime
    because: tuple[str, str]  # (dataset, partition) rewritten upstream
    depth: int  # 1: reads what the backfilled DAG writes; 2: reads what a depth-1 DAG writes; ...


def downstream_plan(written: Mapping[str, Iterable[str]], consumers: Sequence[Consumer]) -> list[DownstreamItem]:
    """Which consumer DAGs re-run which partitions when the datasets in `written` (dataset -> partitions) are
    rewritten: each consumer of a rewritten partition re-runs it, and what it writes is rewritten in turn.
    In dependency order: a DAG comes after every DAG whose writes it reads (breadth-first by depth, a DAG
    reached again deeper moves down to the deeper place). Refuses a cycle of datasets."""
    by_input: dict[str, list[Consumer]] = {}
    for c in consumers:
        for d in c.inputs:
            by_input.setdefault(d, []).append(c)
    plan: dict[tuple[str, str], DownstreamItem] = {}
    frontier = {d: set(ps) for d, ps in written.items()}
    seen: dict[tuple[TimePartitions, str], tuple[dt.datetime, str]] = {}
    depth = 0
    while frontier:
        depth += 1
        if depth > len(consumers) + 1:
            raise DatasetError("the datasets' consumers form a cycle: " + ", ".join(sorted({c.dag_id for c in
                                                                                          consumers})))
        nxt: dict[str, set[str]] = {}
        for dataset in sorted(frontier):
            for c in by_input.get(dataset, []):
                for part in sorted(frontier[dataset]):
                    assert c.partitions is not None
                    found = seen.get((c.partitions, part))
                    if found is None:  # (consumers of one partitioning share the arithmetic)
                        begins = c.partitions.interval(part).start
                        found = seen[(c.partitions, part)] = (begins, c.partitions.key(begins))
                    key = (c.dag_id, found[1])
                    plan[key] = DownstreamItem(c.dag_id, key[1], found[0], (dataset, part), depth)
                    for out in c.outputs:
                        nxt.setdefault(out, set()).add(key[1])
        frontier = nxt
    return sorted(plan.values(), key=lambda i: (i.depth, i.dag_id, i.logical_date))


# -- inlets: what a try reads -------------------------------------------------------------------------------------

INLET_EVENTS_LIMIT = 100  # the newest events of an unpartitioned inlet (or an alias) a try is given


def inlet_leaf(inlet: Mapping[str, Any]) -> str:
    """An inlet's key among a try's inlet events: `dataset:KEY` or `alias:NAME` (as leaf_keys names them)."""
    return f"dataset:{inlet['dataset']}" if "dataset" in inlet else f"alias:{inlet['alias']}"


def inlet_partitions(inlet: Mapping[str, Any], start: dt.datetime, end: dt.datetime) -> list[str] | None:
    """The partitions of a partitioned inlet that a run with data interval [start, end] reads (those of its
    interval: one for a partition-triggered run); None: not partitioned (the try gets the newest events)."""
    parts = partitions_from(inlet.get("partitions")) if "dataset" in inlet else None
    return None if parts is None else parts.within(start, end)


def asset_key(name: str | None, uri: str | None) -> str:
    """The key of the asset `for_asset(name=..., uri=...)` names (an Asset's name, else its uri)."""
    if not name and not uri:
        raise ValueError("name and uri cannot both be None")
    return Asset(name, uri).key


class InletEvent(dict[str, Any]):
    """One dataset event a try reads, as a dict and, Airflow's way, by attribute (`event.extra`,
    `event.timestamp`, `event.source_dag_id`, `event.source_run_id`, `event.source_task_id`, `event.partition`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class InletEvents:
    """`context.inlet_events` (Airflow 2.10+, 3.x): `inlet_events[dataset]` (a Dataset or Asset, an alias, a
    dataset's key, or the inlet's index) is the list of that inlet's events the try was given, oldest first
    (`[-1]`: the newest): for a partitioned dataset, the newest event of each partition of the run's data
    interval; otherwise the newest INLET_EVENTS_LIMIT events. Only the task's inlets can be asked for."""

    def __init__(self, found: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self._found = {leaf: [InletEvent(e) for e in events] for leaf, events in found.items()}

    def _leaf(self, key: Any) -> str:
        if isinstance(key, bool):
            raise KeyError(key)
        if isinstance(key, int):
            return list(self._found)[key]
        if isinstance(key, Dataset):
            return f"dataset:{key.key}"
        if isinstance(key, DatasetAlias):
            return f"alias:{key.name}"
        return f"dataset:{key}"

    def __getitem__(self, key: Any) -> list[InletEvent]:
        try:
            return self._found[self._leaf(key)]
        except (KeyError, IndexError):
            named = ", ".join(leaf.split(":", 1)[1] for leaf in self._found) or "none"
            raise KeyError(f"{key!r} is not an inlet of this task (its inlets: {named})") from None

    def for_asset(self, *, name: str | None = None, uri: str | None = None) -> list[InletEvent]:
        """Airflow 3's `inlet_events.for_asset(name=..., uri=...)`: `inlet_events[Asset(name, uri)]`."""
        return self[asset_key(name, uri)]

    def for_asset_alias(self, *, name: str) -> list[InletEvent]:
        """Airflow 3's `inlet_events.for_asset_alias(name=...)`."""
        return self[DatasetAlias(name)]

    def __contains__(self, key: Any) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return (leaf.split(":", 1)[1] for leaf in self._found)

    def __len__(self) -> int:
        return len(self._found)


# -- Metadata: what a task function yields about its outlets ---------------------------------------------------------

class Metadata:
    """Airflow's `Metadata(target, extra, alias=None)`, yielded by a task function (`yield Metadata(dataset,
    {"rows": 5})`): the extra of this try's event of `target` (a Dataset, an Asset or a dataset's key), and with
    `alias`, an event of `target` added to that alias (as `outlet_events[alias].add(target, extra=extra)`)."""

    def __init__(self, target: Dataset | str, extra: Mapping[str, Any],
                 alias: DatasetAlias | str | None = None) -> None:
        self.uri = target.key if isinstance(target, Dataset) else str(target)
        self.extra = dict(extra)
        self.alias_name = alias.name if isinstance(alias, DatasetAlias) else alias


def run_yielding(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], outlet_events: Any) -> Any:
    """Call a generator function as Airflow calls a task's: each Metadata it yields goes to `outlet_events` (the
    try's), and its value is what the generator returns. Anything else it yields is left, as Airflow leaves it,
    with a line in the try's log saying so."""
    def run() -> Iterator[Any]:
        found[0] = yield from fn(*args, **kwargs)

    found: list[Any] = [None]
    for item in run():
        if not isinstance(item, Metadata):
            print(f"[ledger] ignored what the task function yielded: a {type(item).__name__}, not a Metadata "
                  "(return a value to pass it on)", flush=True)
            continue
        outlet_events[item.uri].extra = item.extra
        if item.alias_name:
            outlet_events[item.alias_name].add(Dataset(item.uri), extra=item.extra)
    return found[0]
