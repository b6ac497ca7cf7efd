"""The pure rules of datasets: time partitions (their grains, keys and maths), conditions in their JSON form
(the DAG version's), which events trigger a consumer run, which consumer runs a rewrite makes stale, and the
downstream plan of a rewrite. No I/O: the store reads and writes the rows (ledger/store/datasets.py), the loop
creates runs (scheduler/loop/dataset_runs.py), DAG files name datasets through ledger/sdk/datasets.py.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping, Sequence
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


def manual_partition(cond: Mapping[str, Any], at: dt.datetime) -> tuple[str, DataInterval] | None:
    """The partition a manual run at `at` of a DAG scheduled on partitioned datasets (and on no time schedule) is a
    run of: the one holding `at`, its key and interval, as the scheduler's run of that partition has them. None
    when the condition is unpartitioned (a manual run keeps its [at, at] interval, as in Airflow)."""
    parts = partitioning_of(cond)
    if parts is None:
        return None
    interval = parts.interval(pendulum.instance(at).in_timezone("UTC").isoformat())
    return parts.key(interval.start), interval


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
class TryRead:
    """An event of a partition that a try of a consumer run read of its task's inlets (its `inlets_read`)."""

    run_id: int
    task: tuple[str, int]  # (task id, map index)
    try_number: int
    event: EventRow


def what_runs_read(consumed: Iterable[Consumed], reads: Iterable[TryRead]) -> list[Consumed]:
    """What each consumer run read of each partition: what the latest tries of its tasks read of it, where a try
    recorded its reads of that partition; else the event the run consumed when it was made. A re-run of a task
    (a clear) that reads the newest event makes its run current again; a task whose latest try holds an older
    event keeps the run stale. Unpartitioned events are as consumed (a newer one is never a rewrite)."""
    reads = list(reads)
    latest: dict[tuple[int, tuple[str, int]], int] = {}
    for r in reads:
        latest[(r.run_id, r.task)] = max(latest.get((r.run_id, r.task), 0), r.try_number)
    by_tries: dict[tuple[int, str, str], set[EventRow]] = {}
    for r in reads:
        if r.event.partition is not None and r.try_number == latest[(r.run_id, r.task)]:
            by_tries.setdefault((r.run_id, r.event.dataset, r.event.partition), set()).add(r.event)
    found = [c for c in consumed
             if c.event.partition is None or (c.run_id, c.event.dataset, c.event.partition) not in by_tries]
    found += [Consumed(run_id, e) for (run_id, _d, _p), evs in by_tries.items() for e in sorted(evs, key=_id)]
    return sorted(found, key=lambda c: (c.run_id, c.event.id))


def _id(e: EventRow) -> int:
    return e.id


@dataclass(frozen=True, slots=True)
class Stale:
    """A consumer run that read a partition since rewritten: `read` is the event it read (what_runs_read), `by`
    the newest event of that partition (the write that made it stale)."""

    run_id: int
    read: EventRow
    by: EventRow


def stale_runs(consumed: Iterable[Consumed], latest: Mapping[tuple[str, str], EventRow]) -> list[Stale]:
    """The runs that read a partition's event when a newer one of that partition exists (`consumed`: what they
    read, what_runs_read); a run stale on several inputs is listed once, with its newest cause."""
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
