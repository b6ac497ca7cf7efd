"""The JSON documents of datasets (`ledger datasets list|show`, `ledger lineage --stale`, a run's consumed
events), shared by the CLI, the web pages and /api/v1. Read-only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.dataset_rules import (
    Consumed,
    describe,
    leaf_keys,
    partitioning_of,
    partitions_from,
    stale_runs,
)
from ledger.core.dates import iso
from ledger.core.errors import NotFound
from ledger.core.versions import DagSpec
from ledger.sdk.datasets import DatasetError, TimePartitions
from ledger.services.run_document import consumed_document as consumed_document
from ledger.services.run_document import event_json as event_json
from ledger.services.run_document import inlets_document as inlets_document
from ledger.store import dags as dag_store
from ledger.store import datasets as dataset_store

Doc = dict[str, Any]


def _specs(session: Session) -> list[DagSpec]:
    return [dag_store.spec(session, d.dag_id, d.current_version) for d in dag_store.listing(session)
            if d.current_version is not None]


def _inputs(spec: DagSpec) -> list[str]:
    if spec.datasets is None:
        return []
    return [k.split(":", 1)[1] for k in leaf_keys(spec.datasets["condition"]) if k.startswith("dataset:")]



def datasets_document(session: Session) -> list[Doc]:
    """`ledger datasets list --json`: every dataset a DAG writes or is scheduled on, or that has events."""
    found: dict[str, Doc] = {}

    def entry(key: str) -> Doc:
        return found.setdefault(key, {"dataset": key, "partitions": None, "producers": [], "consumers": [],
                                      "events": 0, "last_event_at": None})

    for spec in _specs(session):
        for task in spec.tasks.values():
            for out in task.outlets:
                if "dataset" in out:
                    e = entry(str(out["dataset"]))
                    e["producers"].append(f"{spec.dag_id}.{task.task_id}")
                    e["partitions"] = e["partitions"] or out.get("partitions")
        if spec.datasets is not None:
            parts = partitioning_of(spec.datasets["condition"])
            for key in _inputs(spec):
                e = entry(key)
                e["consumers"].append(spec.dag_id)
                e["partitions"] = e["partitions"] or (parts.describe() if parts else None)
    for key, (n, last) in dataset_store.event_counts(session).items():
        e = entry(key)
        e["events"], e["last_event_at"] = n, iso(last)
    for e in found.values():
        e["producers"], e["consumers"] = sorted(set(e["producers"])), sorted(set(e["consumers"]))
    return [found[k] for k in sorted(found)]


def dataset_document(session: Session, key: str, *, limit: int = 50) -> Doc:
    """`ledger datasets show DATASET --json`: producers, consumers, latest events, and for a partitioned dataset
    the partition matrix: per partition and consumer, current / stale / missing."""
    listed = {d["dataset"]: d for d in datasets_document(session)}
    if key not in listed:
        known = ", ".join(listed) or "none yet"
        raise NotFound(f"no dataset {key!r}; known datasets: {known}")
    doc = dict(listed[key])
    recent = dataset_store.events_of(session, dataset=key, limit=limit)
    writers = dataset_store.writers_of(session, [e.id for e in recent])
    doc["events"] = [event_json(e, writers) for e in recent]
    parts = partitions_from(doc["partitions"])
    doc["matrix"] = partition_matrix(session, key, doc["consumers"], parts) if parts is not None else []
    return doc


def partition_matrix(session: Session, key: str, consumers: list[str], parts: TimePartitions) -> list[Doc]:
    """Per partition of a dataset (oldest first): its newest event, and per consumer DAG whether its live run of
    that partition read it (current), read an older event (stale), or there is none (missing)."""
    latest = {p: e for (_d, p), e in dataset_store.latest_partitions(session, [key]).items()}
    read: dict[str, dict[str, int]] = {}
    for dag_id in consumers:
        for c in dataset_store.read_by_live_runs(session, dag_id):
            if c.event.dataset == key and c.event.partition is not None:
                seen = read.setdefault(dag_id, {})
                seen[c.event.partition] = min(seen.get(c.event.partition, c.event.id), c.event.id)
    rows = []
    for part in sorted(latest, key=lambda p: _start(parts, p)):
        e = latest[part]
        cells = {}
        for dag_id in consumers:
            had = read.get(dag_id, {}).get(part)
            cells[dag_id] = "missing" if had is None else "current" if had >= e.id else "stale"
        rows.append({"partition": part, "event_id": str(e.id), "consumers": cells})
    return rows


def _start(parts: TimePartitions, key: str) -> datetime:
    try:
        return parts.interval(key).start
    except DatasetError:
        return datetime.max.replace(tzinfo=UTC)


def stale_document(session: Session, dag_id: str | None = None) -> list[Doc]:
    """`ledger lineage --stale --json`: the live consumer runs that read a partition since rewritten, each with
    what it read and the write that made it stale."""
    result = []
    for spec in _specs(session):
        if spec.datasets is None or (dag_id is not None and spec.dag_id != dag_id):
            continue
        found = stale_of(session, spec)
        if not found:
            continue
        runs = dataset_store.run_dates(session, found)
        writers = dataset_store.writers_of(session, [e.id for s in found.values() for e in (s.read, s.by)])
        for run_id, s in sorted(found.items(), key=lambda kv: runs[kv[0]][1]):
            result.append({"dag_id": spec.dag_id, "run_id": str(run_id), "logical_date": iso(runs[run_id][1]),
                           "state": runs[run_id][2], "dataset": s.read.dataset, "partition": s.read.partition,
                           "read": event_json(s.read, writers), "stale_because": event_json(s.by, writers)})
    return result


def stale_of(session: Session, spec: DagSpec) -> dict[int, Any]:
    """run id -> Stale, for the live runs of a consumer DAG."""
    inputs = _inputs(spec)
    if not inputs:
        return {}
    consumed: list[Consumed] = dataset_store.read_by_live_runs(session, spec.dag_id)
    if not consumed:
        return {}
    return {s.run_id: s for s in stale_runs(consumed, dataset_store.latest_partitions(session, inputs))}




def condition_text(spec: DagSpec) -> str | None:
    return None if spec.datasets is None else describe(spec.datasets["condition"])


def timeline_marks(session: Session, dag_id: str) -> dict[int, Doc] | None:
    """For the timeline of a DAG scheduled on datasets (None for any other): run id -> {"stale": bool,
    "stale_because": the write that made it stale, "rerun_because": the upstream writes that caused the run}."""
    dag = dag_store.find(session, dag_id)
    if dag is None or dag.current_version is None:
        return None
    spec = dag_store.spec(session, dag_id, dag.current_version)
    if spec.datasets is None:
        return None
    stale = stale_of(session, spec)
    causes = dataset_store.causes_of_dag(session, dag_id)
    writers = dataset_store.writers_of(session, [e.id for s in stale.values() for e in (s.read, s.by)]
                                       + [e.id for evs in causes.values() for e in evs])
    marks: dict[int, Doc] = {}
    for run_id, s in stale.items():
        marks.setdefault(run_id, {})["stale_because"] = event_json(s.by, writers)
    for run_id, evs in causes.items():
        marks.setdefault(run_id, {})["rerun_because"] = [event_json(e, writers) for e in evs]
    return marks


def with_marks(rows: list[Doc], marks: dict[int, Doc] | None) -> list[Doc]:
    """Timeline rows (documents.timeline_json) of a consumer DAG with `stale` and its reasons."""
    if marks is None:
        return rows
    for row in rows:
        mark = marks.get(int(row["run_id"]), {})
        row["stale"] = "stale_because" in mark and row["state"] != "overridden"
        row.update(mark)
    return rows
