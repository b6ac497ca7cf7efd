"""Data-aware scheduling: the dataset events a producer's successful try records, and the consumer runs they
make (ledger/sdk/datasets.py has the rules, ledger/store/datasets.py the records).

`record_outlets` is called by the job that holds the producer's run, in the transaction that records the try's
outcome. `create_dataset_runs` is called by the scheduler with its other run creation: for each DAG scheduled on
datasets, a run when an unpartitioned condition is met (consuming every pending event; its data interval runs
from the first to the last of them, as in Airflow); one run per partition of a partitioned condition once every
input it needs has that partition (the partition's logical date and interval); and, for a consumer run that read
a partition since rewritten, an override run when the DAG says `on_upstream_rewrite="rerun"` or the rewrite
comes from a `--downstream` backfill. Each run records the events it consumed, and which of them caused it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.dataset_rules import (
    Consumed,
    EventRow,
    Stale,
    leaf_keys,
    partitioning_of,
    ready_partitions,
    stale_runs,
    trigger_interval,
    unpartitioned_trigger,
)
from ledger.core.schedule import DataInterval
from ledger.core.states import RunType
from ledger.core.versions import DagSpec
from ledger.models import DagRun
from ledger.sdk.datasets import INLET_EVENTS_LIMIT, TimePartitions, given_inlets, inlet_event, outlet_event_rows
from ledger.services.dataset_docs import event_json
from ledger.store import dags as dag_store
from ledger.store import datasets as dataset_store
from ledger.store import events
from ledger.store import loop as loop_store
from ledger.store import runs as run_store


def record_outlets(session: Session, spec: DagSpec, *, run_id: int, task_id: str, try_number: int,
                   writes: Sequence[Mapping[str, Any]], outlet_events: Sequence[Mapping[str, Any]],
                   now: datetime) -> int:
    """Record the dataset events of a successful try: one per outlet (per partition of a partitioned one: the
    partitions its lineage writes name, else those of the run's data interval), with the `extra` the try gave
    through `context.outlet_events`, and one per dataset it added to an alias."""
    task = spec.tasks.get(task_id)
    if task is None or not (task.outlets or outlet_events):
        return 0
    run = dataset_store.run_of(session, run_id)
    if run is None:
        return 0
    base = {"run_id": run_id, "dag_id": spec.dag_id, "task_id": task_id, "try_number": try_number,
            "downstream": dataset_store.sends_downstream(session, run), "created_at": now}
    return dataset_store.record_events(session, [
        {**base, **row} for row in outlet_event_rows(task.outlets, writes, outlet_events, run.data_interval_start,
                                                     run.data_interval_end)])


@dataclass
class QuietConsumers:
    """What a scheduler learnt in its passes: the consumer DAGs (by the leaves of their conditions, as of the last
    pass over every DAG), those that had nothing to create (by the version they had then), and the newest dataset
    event the passes have seen. A quiet consumer is skipped until one of the datasets or aliases of its condition
    gets an event newer than that (or it gets a new version, or leaves the schedulable DAGs): consumer runs come
    only from events. A pass after an event (`only_news`) looks only at that event's consumers and those not quiet
    (a stale run waiting for its job to finish is never quiet), not at every DAG."""

    quiet: dict[str, str] = field(default_factory=dict)
    consumers: dict[str, set[str]] = field(default_factory=dict)  # leaf -> the consumer DAGs it is a leaf of
    seen: int = -1  # the newest event id of the last pass (-1: none yet, every consumer is looked at)

    def news(self, session: Session) -> bool:
        """Whether an event newer than the last pass's exists (one cheap read: the newest id); never when the last
        pass over every DAG found no consumer (no read: the next such pass looks at every consumer anyway)."""
        return bool(self.consumers) and dataset_store.newest_event_id(session) > self.seen

    def candidates(self, changed: set[str]) -> list[str]:
        """The consumers a pass after events of `changed` looks at."""
        known = {d for dags in self.consumers.values() for d in dags}
        return sorted({d for leaf in changed for d in self.consumers.get(leaf, ())} | (known - set(self.quiet)))


def create_dataset_runs(session: Session, *, now: datetime, actor: str, cache: QuietConsumers | None = None,
                        only_news: bool = False, dags: list[tuple[str, str, str]] | None = None) -> list[DagRun]:
    """Create the consumer runs whose conditions are met (see the module's doc); `only_news`: look only at the
    consumers of the events since the cache's last pass, and those not quiet; `dags`: the schedulable DAGs as
    dag_store.schedulable read them in this transaction (a pass over every DAG reads them otherwise). A pass over
    every DAG that finds no consumer among them reads no dataset event."""
    created: list[int] = []
    if not only_news:
        dags = dag_store.schedulable(session) if dags is None else dags
        if not any(dag_store.spec(session, dag_id, version).datasets is not None for dag_id, version, _f in dags):
            if cache is not None:  # (its `seen` stays: the next pass with a consumer looks at every one)
                cache.quiet, cache.consumers = {}, {}
            return []
    newest = dataset_store.newest_event_id(session) if cache is not None else 0
    changed: set[str] | None = None  # the leaves with events since the last pass (None: look at every consumer)
    if cache is not None and cache.seen >= 0:
        changed = dataset_store.written_since(session, cache.seen) if newest > cache.seen else set()
    targeted = only_news and cache is not None and changed is not None
    if targeted:
        assert cache is not None and changed is not None
        dags = dag_store.schedulable(session, cache.candidates(changed))
    else:
        dags = dag_store.schedulable(session) if dags is None else dags
        if cache is not None:  # a paused or removed DAG is looked at afresh when it is back
            names = {dag_id for dag_id, _v, _f in dags}
            cache.quiet = {d: v for d, v in cache.quiet.items() if d in names}
            cache.consumers = {}
    for dag_id, version, _fileloc in dags:
        spec = dag_store.spec(session, dag_id, version)
        if spec.datasets is None:
            continue
        cond = spec.datasets["condition"]
        leaves = leaf_keys(cond)
        if cache is not None and not targeted:
            for leaf in leaves:
                cache.consumers.setdefault(leaf, set()).add(dag_id)
        if cache is not None and changed is not None and cache.quiet.get(dag_id) == version \
                and changed.isdisjoint(leaves):
            continue
        parts = partitioning_of(cond)
        if parts is None:
            made, waiting = _unpartitioned(session, spec, cond, now=now, actor=actor), False
        else:
            made, waiting = _partitioned(session, spec, cond, parts, now=now, actor=actor)
        created += made
        if cache is not None:
            if made or waiting:
                cache.quiet.pop(dag_id, None)
            else:
                cache.quiet[dag_id] = version
    if cache is not None:
        cache.seen = newest
    return sorted(loop_store.runs_by_id(session, created).values(), key=lambda r: (r.dag_id, r.logical_date)) \
        if created else []


def triggering_events(session: Session, runs: Sequence[DagRun]) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """run id -> dataset -> the events it consumed, for the dataset-triggered runs among `runs` (what their tries
    see as `context.triggering_dataset_events`; one query for them all, none without them)."""
    wanted = [r.id for r in runs if r.run_type == RunType.DATASET.value]
    found: dict[int, dict[str, list[dict[str, Any]]]] = {}
    if not wanted:
        return found
    for run_id, _cause, e in dataset_store.consumed_of(session, wanted):
        found.setdefault(run_id, {}).setdefault(e.dataset, []).append({
            "partition": e.partition, "extra": e.extra or {}, "source_dag_id": e.dag_id,
            "source_run_id": str(e.run_id), "source_task_id": e.task_id, "timestamp": e.created_at.isoformat()})
    return found


def _leaves(cond: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    keys = leaf_keys(cond)
    return ([k.split(":", 1)[1] for k in keys if k.startswith("dataset:")],
            [k.split(":", 1)[1] for k in keys if k.startswith("alias:")])


def _unpartitioned(session: Session, spec: DagSpec, cond: Mapping[str, Any], *, now: datetime,
                   actor: str) -> list[int]:
    datasets, aliases = _leaves(cond)
    if unpartitioned_trigger(cond, dataset_store.pending(session, spec.dag_id, datasets, aliases)) is None:
        return []
    run_store.lock_timeline(session, spec.dag_id)  # then read again: another scheduler may have just consumed them
    consumed = unpartitioned_trigger(cond, dataset_store.pending(session, spec.dag_id, datasets, aliases))
    if consumed is None:
        return []
    interval = trigger_interval(consumed)
    # (another run holds that very instant: the next free microsecond; only that instant is read, not every run)
    while run_store.live_dates_from(session, spec.dag_id, interval.start, until=interval.start):
        nudged = interval.start.add(microseconds=1)
        interval = DataInterval(nudged, max(nudged, interval.end))
    run_id = run_store.splice(session, spec, run_store.NewRun(interval, RunType.DATASET), now=now, actor=actor,
                              lock=False).id
    _consumed(session, spec, {run_id: (consumed, set())}, now=now, actor=actor)
    return [run_id]


def _partitioned(session: Session, spec: DagSpec, cond: Mapping[str, Any], parts: TimePartitions, *,
                 now: datetime, actor: str) -> tuple[list[int], bool]:
    """The runs made, and whether a stale run to re-run is waiting for the job holding it."""
    first = _partitions_to_run(session, spec, cond, parts)
    if not first[0]:
        _refuse_echoes(session, spec, first[5], now=now, actor=actor)
        return [], first[4]
    run_store.lock_timeline(session, spec.dag_id)  # then read again: another scheduler may have just made them
    todo, latest, live, reads, waiting, echoes = _partitions_to_run(session, spec, cond, parts)
    _refuse_echoes(session, spec, echoes, now=now, actor=actor)
    if not todo:
        return [], waiting
    datasets, _aliases = _leaves(cond)
    dates = sorted(todo)
    reruns = {i for i, at in enumerate(dates) if todo[at][2]}
    ids = run_store.splice_many(session, spec, [run_store.NewRun(todo[at][1], RunType.DATASET) for at in dates],
                                now=now, actor=actor, replace=[todo[at][2] for at in dates])
    read: dict[int, tuple[list[EventRow], set[int]]] = {}
    old_reads: dict[int, dict[str, int]] = {}
    for c in reads:
        old_reads.setdefault(c.run_id, {})[c.event.dataset] = c.event.id
    for i, at in enumerate(dates):
        part_key = todo[at][0]
        consumed = [latest[(d, part_key)] for d in datasets if (d, part_key) in latest]
        before = old_reads.get(live[at][0], {}) if i in reruns else {}
        read[ids[i]] = (consumed, {e.id for e in consumed if i in reruns and e.id != before.get(e.dataset)})
    _consumed(session, spec, read, now=now, actor=actor)
    return ids, waiting


Todo = dict[datetime, tuple[str, DataInterval, bool]]  # logical date -> (partition, interval, re-run of a stale run)


Echo = tuple[Stale, list[str]]  # a stale run whose rewrite its own writes caused, and the DAGs the writes went through


def _partitions_to_run(session: Session, spec: DagSpec, cond: Mapping[str, Any], parts: TimePartitions
                       ) -> tuple[Todo, dict[tuple[str, str], EventRow], dict[datetime, tuple[int, int | None]],
                                  list[Consumed], bool, list[Echo]]:
    """The partitions a consumer runs now: those its condition holds for and it has no live run of, and those
    whose live run is stale and to be re-run (and is not held by a job); with what they were read from. A stale
    run whose rewrite came from its own writes, through DAGs scheduled on each other's datasets, is not re-run
    (it would re-run them for ever): it is listed among the echoes."""
    datasets, _aliases = _leaves(cond)
    latest = dataset_store.latest_partitions(session, datasets)
    if not latest:
        return {}, latest, {}, [], False, []
    live = dataset_store.live_runs(session, spec.dag_id)
    todo: Todo = {}
    for part in ready_partitions(cond, latest):
        interval = parts.interval(part)
        if interval.start < spec.start_date or (spec.end_date is not None and interval.start > spec.end_date):
            continue
        if interval.start not in live:
            todo[interval.start] = (part, interval, False)
    rerun_all = spec.datasets is not None and spec.datasets.get("on_upstream_rewrite") == "rerun"
    by_run = {run_id: at for at, (run_id, _holder) in live.items()}
    reads = dataset_store.read_by_live_runs(session, spec.dag_id)
    waiting = False
    echoes: list[Echo] = []
    for s in stale_runs(reads, latest):
        at = by_run.get(s.run_id)
        if at is None or not (rerun_all or s.by.downstream):
            continue
        if live[at][1] is not None:  # in flight: re-run once it has finished
            waiting = True
            continue
        through = _echo_of(session, s.run_id, s.by.id)
        if through is not None:
            echoes.append((s, through))
            continue
        stale_part = s.read.partition or ""
        todo[at] = (stale_part, parts.interval(stale_part), True)
    return todo, latest, live, reads, waiting, echoes


def _echo_of(session: Session, run_id: int, event_id: int) -> list[str] | None:
    """Whether the dataset event `event_id` came from run `run_id`'s own writes: its writer run consumed an event
    written by a run that consumed ... an event `run_id` wrote. The DAGs of the runs walked back through when it
    did (sorted), else None. One query for the writers and one for what they consumed per step back; a step
    reaches no run twice, so the walk ends."""
    seen: set[int] = set()
    dags: set[str] = set()
    wanted = [event_id]
    while wanted:
        writers = dataset_store.writers_of(session, wanted)
        runs = {run for _dag, run, _task, _backfill in writers.values()}
        if run_id in runs:
            return sorted(dags | {dag for dag, _run, _task, _backfill in writers.values()})
        runs -= seen
        seen |= runs
        dags |= {dag for dag, run, _task, _backfill in writers.values() if run in runs}
        wanted = sorted({e.id for _run, _cause, e in dataset_store.consumed_of(session, runs)}) if runs else []
    return None


def _refuse_echoes(session: Session, spec: DagSpec, echoes: Sequence[Echo], *, now: datetime, actor: str) -> None:
    """Record once, on each stale run its own writes made stale, that it is not re-run and why (the DAGs whose
    datasets form the cycle, and the write), as `backfill --downstream` refuses a cycle."""
    for stale, through in echoes:
        if any((e.details or {}).get("cause", {}).get("event_id") == str(stale.by.id) for e in events.listing(
                session, run_id=stale.run_id, kinds=[RERUN_REFUSED])):
            continue
        writers = dataset_store.writers_of(session, [stale.by.id])
        events.record(session, RERUN_REFUSED, at=now, actor=actor, dag_id=spec.dag_id, run_id=stale.run_id,
                      reason="not re-run: its own writes rewrote what it read (DAGs " + ", ".join(through)
                             + " are scheduled on each other's datasets)",
                      cycle=through, cause=event_json(stale.by, writers))


RERUN_REFUSED = "dataset_rerun_refused"


def _consumed(session: Session, spec: DagSpec, read: Mapping[int, tuple[list[EventRow], set[int]]], *,
              now: datetime, actor: str) -> None:
    """Record what each new run consumed, and an event naming it (and the write that caused a re-run)."""
    dataset_store.record_consumed(session, [
        {"run_id": run_id, "dag_id": spec.dag_id, "event_id": e.id, "cause": e.id in cause}
        for run_id, (consumed, cause) in read.items() for e in consumed])
    writers = dataset_store.writers_of(session, [e.id for consumed, _ in read.values() for e in consumed])
    rows = []
    for run_id, (consumed, cause) in read.items():
        details: dict[str, Any] = {"events": [event_json(e, writers) for e in consumed]}
        if cause:
            details["cause"] = [event_json(e, writers) for e in consumed if e.id in cause]
        rows.append(dict(at=now, kind="dataset_rerun" if cause else "dataset_triggered", actor=actor,
                         dag_id=spec.dag_id, run_id=run_id, details=details))
    events.record_many(session, rows)


def _read_inlet(session: Session, got: dict[str, list[Any]], leaf: str,
                partitions: list[str] | None) -> list[dict[str, Any]]:
    """An inlet's events from the database, as a try is given them; the rows read are kept in `got`."""
    got[leaf] = dataset_store.inlet_events(session, leaf, partitions, INLET_EVENTS_LIMIT)
    return [inlet_event(event_id=e.id, dataset=e.dataset, partition=e.partition, alias=e.alias, extra=e.extra,
                        dag_id=e.dag_id, run_id=e.run_id, task_id=e.task_id, created_at=e.created_at)
            for e in got[leaf]]


def inlet_events(session: Session, chosen: Sequence[tuple[Any, DagRun, DagSpec]], tries: Mapping[int, int], *,
                 now: datetime, actor: str) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """task instance id -> inlet -> the events its try reads (`context.inlet_events`), for the tries just queued
    whose tasks have inlets; each such try's reads are recorded as an `inlets_read` event of its run, in the
    transaction that queues it (`ledger runs show` lists them per try)."""
    found: dict[int, dict[str, list[dict[str, Any]]]] = {}
    rows = []
    for ti, run, spec in chosen:
        task = spec.tasks.get(ti.task_id)
        if task is None or not task.inlets:
            continue
        got: dict[str, list[Any]] = {}
        found[ti.id] = given_inlets(task.inlets, run.data_interval_start, run.data_interval_end,
                                    partial(_read_inlet, session, got))
        read_rows = [{"inlet": leaf.split(":", 1)[1], "event_id": str(e.id), "dataset": e.dataset,
                      "partition": e.partition, "source_dag_id": e.dag_id, "source_run_id": str(e.run_id)}
                     for leaf, evs in got.items() for e in evs]
        rows.append(dict(at=now, kind="inlets_read", actor=actor, dag_id=run.dag_id, run_id=run.id,
                         details={"task_id": ti.task_id, "map_index": ti.map_index, "try_number": tries[ti.id],
                                  "read": read_rows}))
    events.record_many(session, rows)
    return found
