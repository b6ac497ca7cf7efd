"""The document of one run (`ledger runs show RUN [--json]`, the run's web page and /api/v1/runs/RUN), and the
shapes it shares with the other documents (ledger/services/documents.py, dataset_docs.py).

It reads through ledger/store/run_reads.py, the Core tables alone: showing a run loads neither SQLAlchemy's ORM
nor a mapped class (decision 0317). Keep it so: what this module imports, `ledger runs show` loads
(tests/cli/test_startup.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ledger.core.dates import iso
from ledger.core.mapping import label
from ledger.store import run_reads

if TYPE_CHECKING:
    from sqlalchemy import Row

    from ledger.core.dataset_rules import EventRow
    from ledger.models import DatasetEvent
    from ledger.store.run_reads import Reader

Doc = dict[str, Any]


def id_text(value: int | None) -> str | None:
    """An id as the documents give it: a string (None stays None)."""
    return None if value is None else str(value)


def run_json(r: Any, stamp: Callable[[Any], str | None] = iso) -> Doc:
    """The stable JSON shape of a run; `stamp` formats timestamps (iso_raw for raw timeline rows)."""
    return {
        "run_id": str(r.id), "logical_date": stamp(r.logical_date),
        "data_interval_start": stamp(r.data_interval_start), "data_interval_end": stamp(r.data_interval_end),
        "run_type": r.run_type, "state": r.state, "previous_run_id": id_text(r.previous_run_id),
        "dag_version": r.version_hash, "overridden_by": id_text(r.overridden_by), "backfill_id": id_text(r.backfill_id),
        "schedule": r.schedule, "created_at": stamp(r.created_at), "started_at": stamp(r.started_at),
        "ended_at": stamp(r.ended_at), "overridden_at": stamp(r.overridden_at),
    }


def run_document(db: Reader, run_id: int | str) -> Doc:
    """`ledger runs show RUN --json`: a run as it was, with its own version's graph, its task instances and
    their tries, and what it wrote. Read through the tables alone (ledger/store/run_reads.py): `db` is a Connection
    (`ledger runs show`, which loads no ORM) or a Session (the web)."""
    r = run_reads.run(db, run_id)
    version = run_reads.version(db, r.dag_id, r.version_hash)
    structure = json.loads(version.structure)
    tries: dict[str, list[Doc]] = {}
    for key, t in run_reads.tries_of_run(db, r.id):
        tries.setdefault(key, []).append(
            {"try_number": t.try_number, "state": t.state, "dag_version": t.dag_version,
             "hostname": t.hostname, "started_at": iso(t.started_at), "ended_at": iso(t.ended_at)})
    row = run_json(r)
    row["dag_id"] = r.dag_id
    row["conf"] = r.conf
    row["lock_holder"] = id_text(r.lock_holder)
    row["code"] = code_json(db, version)
    instances = run_reads.task_instances(db, r.id)  # by id: the order they were made in
    first: dict[str, int] = {}
    for ti in instances:
        first.setdefault(ti.task_id, ti.id)
    instances.sort(key=lambda ti: (first[ti.task_id], ti.map_index))  # a mapped task's instances together
    counts: dict[str, int] = {}
    for ti in instances:
        if ti.map_index >= 0 and ti.state != "removed":
            counts[ti.task_id] = counts.get(ti.task_id, 0) + 1
    # a mapped task says how many instances it had in this run (0: not expanded, or skipped or failed unexpanded;
    # instances `removed` by an expansion over a shorter list after a clear are listed, not counted)
    row["graph"] = {"tasks": [{"task_id": t["task_id"], "kind": t["kind"], "upstream": t["upstream"],
                               **({"group": t["group"]} if t.get("group") else {}),
                               **({"labels": t["labels"]} if "labels" in t else {}),
                               **({"mapped": True, "instances": counts.get(t["task_id"], 0)} if t.get("expand")
                                  else {})}
                              for t in graph_tasks(structure)]}
    row["task_instances"] = [
        {"task_id": ti.task_id, "map_index": ti.map_index, "label": label(ti.task_id, ti.map_index),
         "state": ti.state, "try_number": ti.try_number, "max_tries": ti.max_tries,
         "started_at": iso(ti.started_at), "ended_at": iso(ti.ended_at), "pool": ti.pool,
         "pool_slots": ti.pool_slots, "priority_weight": ti.priority_weight,
         "tries": tries.get(label(ti.task_id, ti.map_index), []),
         # the version its next tries run: its run's, unless a partial clear gave it the latest (decision 0271)
         "dag_version": ti.dag_version or r.version_hash}
        for ti in instances
    ]
    # the versions its tries ran, oldest first: more than one when a clear re-ran part of it on a later version
    row["try_versions"] = list(dict.fromkeys(t["dag_version"] for ti in row["task_instances"] for t in ti["tries"]
                                             if t["dag_version"]))
    row["writes"] = [{"dataset": w.dataset, "partition": w.partition, "task_id": w.task_id,
                      "try_number": w.try_number, "try_state": w.try_state, "rows": w.rows, "path": w.path,
                      "written_at": iso(w.written_at)} for w in run_reads.writes_of_run(db, r.id)]
    row["consumed"] = consumed_document(db, r.id)  # the dataset events it consumed (cause: why it re-ran)
    row["inlets_read"] = inlets_document(db, r.id)  # the events each try read of its task's inlets
    return row


def graph_tasks(structure: Doc) -> list[Doc]:
    """A version's tasks for a graph: each with `labels` (upstream task -> the Label of that edge) when its
    edges from upstream tasks are labelled."""
    labels: dict[str, dict[str, str]] = {}
    for up, down, text in structure.get("edge_labels", []):
        labels.setdefault(down, {})[up] = text
    return [{**t, **({"labels": labels[t["task_id"]]} if t["task_id"] in labels else {})} for t in structure["tasks"]]


def code_json(db: Reader, v: Any) -> Doc:
    """What the documents say about a version's code: describe_code, and `dropped`: None, or when and by
    whom a forced `ledger db downgrade` dropped it (its `code_dropped` event: what its tries ran is unknown)."""
    code = describe_code(v)
    e = run_reads.code_dropped_by(db, v)
    code["dropped"] = None if e is None else {"at": iso(e.at), "by": e.actor,
                                              "migration": (e.details or {}).get("migration")}
    return code


def describe_code(version: Any) -> dict[str, object]:
    """What `--json` listings say about a version's code (a DagVersion or a row of dag_version)."""
    return {"captured": version.code_snapshot is not None, "entry": version.code_entry,
            "snapshot": version.code_snapshot, "bundle": version.code_bundle}


def event_json(e: DatasetEvent | EventRow | Row[Any], writers: Mapping[int, tuple[str, int, str, int | None]]) -> Doc:
    """A dataset event as the documents show it, with the run that wrote it (`writers`: run_reads.writers_of)."""
    dag_id, run_id, task_id, backfill_id = writers.get(e.id, ("?", 0, "?", None))
    return {"event_id": str(e.id), "dataset": e.dataset, "partition": e.partition, "alias": e.alias,
            **({"extra": e.extra} if hasattr(e, "extra") else {}),  # a stored event's (EventRow has none)
            "downstream": bool(e.downstream), "at": iso(e.created_at),
            "written_by": {"dag_id": dag_id, "run_id": str(run_id), "task_id": task_id,
                           "backfill_id": None if backfill_id is None else str(backfill_id)}}


def consumed_document(db: Reader, run_id: int) -> list[Doc]:
    """The events a run consumed (`cause`: why it re-ran), oldest first."""
    rows = run_reads.consumed_of(db, [run_id])
    writers = run_reads.writers_of(db, [e.id for _r, _c, e in rows])
    return [{**event_json(e, writers), "cause": cause} for _r, cause, e in rows]


def inlets_document(db: Reader, run_id: int) -> list[Doc]:
    """What each try of a run read of its task's inlets (the events it was given as `context.inlet_events`), one
    row per event read, in the order the tries were queued."""
    rows = []
    for e in run_reads.inlet_reads(db, run_id):
        d = e.details
        for r in d.get("read", []):
            rows.append({"task_id": d.get("task_id"), "map_index": d.get("map_index", -1),
                         "try_number": d.get("try_number"), **r, "at": iso(e.at)})
    return rows
