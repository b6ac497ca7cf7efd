"""Datasets (Airflow's `Dataset`, 3.x's `Asset`): outlets and inlets of tasks, the conditions a DAG is scheduled
on, and time partitions.

The names a DAG file uses; the rules on them (their JSON form, condition evaluation, partition maths) are
ledger/core/dataset_rules.py. What is stored (dataset events, what each run consumed) is ledger/store/datasets.py;
run creation is scheduler/loop/dataset_runs.py.

A dataset is named by its key: a Dataset's uri, an Asset's name. A partitioned dataset has one partition per
interval of a schedule in a time zone (`TimePartitions("hourly", timezone="Europe/Berlin")`): the DST day of an
hourly dataset has 23 or 25 partitions, as an hourly schedule has 23 or 25 runs. A partition's key is its start in
the dataset's time zone: `2024-03-02` for daily and coarser partitions, `2024-10-27T02:00+02:00` for finer ones
(the offset tells the two 02:00 hours of a fall-back day apart).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ledger.core.dataset_rules import (
    DatasetError as DatasetError,
)
from ledger.core.dataset_rules import (
    TimePartitions as TimePartitions,
)
from ledger.core.dataset_rules import (
    describe as describe,
)
from ledger.core.dataset_rules import (
    leaf_keys as leaf_keys,
)
from ledger.core.dataset_rules import (
    met as met,
)
from ledger.core.dataset_rules import (
    partitions_from as partitions_from,
)

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


def given_inlets(inlets: Sequence[Mapping[str, Any]], start: dt.datetime, end: dt.datetime,
                 read: Callable[[str, list[str] | None], list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """What a try is given of its task's inlets (`context.inlet_events`), by inlet: `read(leaf, partitions)` finds
    the events (the database for the scheduler, the test run's own for `ledger dags test`)."""
    return {inlet_leaf(inlet): read(inlet_leaf(inlet), inlet_partitions(inlet, start, end)) for inlet in inlets}


def inlet_event(*, event_id: int, dataset: str, partition: str | None, alias: str | None,
                extra: Mapping[str, Any] | None, dag_id: str, run_id: int, task_id: str,
                created_at: dt.datetime) -> dict[str, Any]:
    """One dataset event as a try is given it (an InletEvent's fields)."""
    return {"event_id": str(event_id), "dataset": dataset, "partition": partition, "alias": alias,
            "extra": dict(extra or {}), "source_dag_id": dag_id, "source_run_id": str(run_id),
            "source_task_id": task_id, "timestamp": created_at.isoformat()}


def newest_events(events: Sequence[Mapping[str, Any]], leaf: str, partitions: Sequence[str] | None,
                  limit: int = INLET_EVENTS_LIMIT) -> list[Mapping[str, Any]]:
    """Of `events` (oldest first; each with `dataset`, `alias`, `partition`), those an inlet `leaf` reads, as the
    database's `inlet_events` picks them: the newest of each of `partitions`, else the newest `limit`."""
    kind, name = leaf.split(":", 1)
    if partitions is not None:
        newest = {e.get("partition"): e for e in events
                  if e.get("dataset") == name and e.get("partition") in partitions}
        return [newest[p] for p in partitions if p in newest]
    field = "dataset" if kind == "dataset" else "alias"
    return [e for e in events if e.get(field) == name][-limit:]


def outlet_event_rows(outlets: Sequence[Mapping[str, Any]], writes: Sequence[Mapping[str, Any]],
                      outlet_events: Sequence[Mapping[str, Any]], start: dt.datetime,
                      end: dt.datetime) -> list[dict[str, Any]]:
    """The dataset events a successful try makes (`dataset`, `partition`, `alias`, `extra`): one per outlet (per
    partition of a partitioned one: the partitions its lineage writes name, else those of the run's data interval
    [start, end]), with the `extra` the try gave through `context.outlet_events`, and one per dataset it added to
    an alias."""
    extras: dict[str, dict[str, Any]] = {}
    for ev in outlet_events:
        if not ev.get("alias") and isinstance(ev.get("extra"), dict):
            extras.setdefault(str(ev["outlet"]), {}).update(ev["extra"])
    rows: list[dict[str, Any]] = []
    for out in outlets:
        if "dataset" not in out:
            continue  # an alias: its datasets are named at run time (outlet_events[alias].add(...))
        key = str(out["dataset"])
        extra = extras.get(key) or extras.get(str(out.get("uri"))) or None
        parts = partitions_from(out.get("partitions"))
        for part in ([None] if parts is None else
                     produced_partitions(parts, key, str(out.get("uri", key)), writes, start, end)):
            rows.append({"dataset": key, "partition": part, "alias": None, "extra": extra})
    for ev in outlet_events:
        if ev.get("alias") and ev.get("outlet"):
            rows.append({"dataset": str(ev["outlet"]), "partition": None, "alias": str(ev["alias"]),
                         "extra": ev.get("extra") if isinstance(ev.get("extra"), dict) else None})
    return rows


def produced_partitions(parts: TimePartitions, key: str, uri: str, writes: Sequence[Mapping[str, Any]],
                        start: dt.datetime, end: dt.datetime) -> list[str]:
    """The partitions a try wrote: those its lineage writes of the dataset name (by name or uri), else those of
    its run's data interval."""
    named = []
    for w in writes:
        if w.get("dataset") in (key, uri):
            try:
                named.append(parts.normal(str(w["partition"])))
            except DatasetError:
                continue  # a partition that is not one of this dataset's: lineage keeps it, no event is made
    return list(dict.fromkeys(named)) or parts.within(start, end)


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


class TriggeringEvents(dict[str, list[InletEvent]]):
    """Airflow's `triggering_dataset_events` / `triggering_asset_events` of a dataset-triggered run: dataset key ->
    the events the run consumed, each by key or by attribute (`event.extra`). A Dataset or Asset is read as its
    key, as Airflow 3 reads `triggering_asset_events[asset]`; Airflow 2's string keys read as they are."""

    def __init__(self, found: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        super().__init__({key: [InletEvent(e) for e in events] for key, events in found.items()})

    def __getitem__(self, key: Any) -> list[InletEvent]:
        return super().__getitem__(key.key if isinstance(key, Dataset) else key)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key.key if isinstance(key, Dataset) else key)

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(key.key if isinstance(key, Dataset) else key, default)


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
