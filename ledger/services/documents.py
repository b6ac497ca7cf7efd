"""The JSON documents of ledger: what `ledger ... --json` prints and what the web API returns.

One serializer for both: the CLI commands and the web server call these functions, so the two cannot
drift apart (tests/web asserts they are equal). Each function reads through ledger.store and builds
plain dicts; none writes.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pendulum
from sqlalchemy.orm import Session

from ledger.core.backfill_state import agreed_state
from ledger.core.dataset_rules import schedule_summary
from ledger.core.dates import iso, iso_raw, parse_user_date
from ledger.core.errors import DagNotFound, InvalidInput, NotFound
from ledger.core.mapping import NOT_MAPPED, label, split_label
from ledger.core.schedule import DataInterval, next_scheduled
from ledger.core.states import RunState, RunType
from ledger.core.versions import masked
from ledger.models import Backfill, Dag, DagVersion, ImportError_
from ledger.sdk.timetables import read_schedule
from ledger.services.run_document import code_json, id_text
from ledger.services.run_document import graph_tasks as graph_tasks  # the run's document and the shapes it
from ledger.services.run_document import run_document as run_document  # shares, where the CLI and the web
from ledger.services.run_document import run_json as run_json  # have always found them
from ledger.store import backfills as backfill_store
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import events as event_store
from ledger.store import lineage as lineage_store
from ledger.store import runs as run_store
from ledger.store import web as web_store

Doc = dict[str, Any]


# -- runs and the timeline ------------------------------------------------------------------------------



def runs_list_document(session: Session, *, states: Iterable[str] = (), run_types: Iterable[str] = (),
                       dag_id: str | None = None, start: str | None = None, end: str | None = None,
                       before: int | None = None, limit: int = 100) -> tuple[list[Doc], int | None]:
    """`ledger runs list`: runs of every DAG, newest first, filtered by state, type, DAG and logical date (dates in
    UTC; an end given as a date includes that day); (the runs, the `before` of the next older page or None). A DAG
    that was never registered is refused (DagNotFound): a misspelled filter must not read as "no runs match"."""
    if dag_id is not None and dag_store.find(session, dag_id) is None:
        raise DagNotFound(dag_id)
    states, run_types = sorted(set(states)), sorted(set(run_types))
    for given, known, what in ((states, RunState, "--state"), (run_types, RunType, "--type")):
        wrong = [v for v in given if v not in {k.value for k in known}]
        if wrong:
            raise InvalidInput(f"{what} {wrong[0]!r} is not one of {', '.join(k.value for k in known)}")
    lo = parse_user_date(start, timezone="UTC", what="--start") if start else None
    hi = parse_user_date(end, timezone="UTC", what="--end", end_of_day=True) if end else None
    if lo is not None and hi is not None and hi < lo:
        raise InvalidInput(f"--end {end} is before --start {start}")
    rows = web_store.runs_across(session, states=states, run_types=run_types, dag_id=dag_id, start=lo, end=hi,
                                 before=before, limit=limit)
    page = rows[:limit]
    docs = [{"dag_id": r.dag_id, **run_json(r)} for r in page]
    return docs, page[-1].id if len(rows) > limit else None


def timeline_json(rows: Iterable[Any]) -> list[Doc]:
    """run_json over raw timeline rows (store.runs.timeline_rows), unrolled: 100,000 runs must print in
    well under 2 s."""
    t = iso_raw
    out = []
    for (run_id, logical, start, end, run_type, state, previous, version, by, backfill_id, schedule, created,
         started, ended, overridden_at, _holder) in rows:
        out.append({
            "run_id": str(run_id), "logical_date": t(logical), "data_interval_start": t(start),
            "data_interval_end": t(end), "run_type": run_type, "state": state,
            "previous_run_id": None if previous is None else str(previous), "dag_version": version,
            "overridden_by": None if by is None else str(by),
            "backfill_id": None if backfill_id is None else str(backfill_id), "schedule": schedule,
            "created_at": t(created), "started_at": t(started), "ended_at": t(ended), "overridden_at": t(overridden_at),
        })
    return out


def timeline_range(dag: Dag, start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    """The logical-date range `ledger timeline DAG --start A --end B` reads (dates in the DAG's timezone; an end
    given as a date without a time includes that whole day)."""
    lo = parse_user_date(start, timezone=dag.timezone, what="--start") if start else None
    hi = parse_user_date(end, timezone=dag.timezone, what="--end", end_of_day=True) if end else None
    if lo is not None and hi is not None and hi < lo:
        raise InvalidInput(f"--end {end} is before --start {start}")
    return lo, hi


def failure_reasons(session: Session, run_id: int, labels: Iterable[str]) -> dict[str, Doc]:
    """Why each of these task instances (labels) of a run last failed, in one line: its latest `task_failed` or
    `try_lost` event's reason (the first line of it, at most 200 characters) and try number."""
    wanted, out = set(labels), dict[str, Doc]()
    if not wanted:
        return out
    for e in event_store.listing_json(session, run_id=run_id, kinds=["task_failed", "try_lost"],
                                      task_signals=False):  # oldest first: the latest one stays
        d = e["details"]
        key = label(str(d.get("task_id")), int(d.get("map_index", NOT_MAPPED)))
        if key in wanted:
            lines = [line.strip() for line in str(d.get("reason") or "").splitlines() if line.strip()]
            out[key] = {"try_number": d.get("try_number"), "reason": lines[0][:200] if lines else "no reason recorded",
                        "kind": e["kind"]}
    return out



def xcom_rows(session: Session, run_id: int, task_id: str, map_index: int) -> list[Doc]:
    """`ledger tasks xcom ... --json`: the values a task instance's tries passed on, per try, with every secret
    ledger knows of as *** (stored as passed: the tasks downstream need the real values)."""
    from ledger.services.secrets import known_secrets, mask_value
    from ledger.store import xcom as xcom_store

    rows = xcom_store.for_task(session, run_id, task_id, map_index)
    secrets = known_secrets(session) if rows else frozenset()
    return [{"try_number": x.try_number, "key": x.key, "value": mask_value(x.value, secrets),
             "created_at": iso(x.created_at)} for x in rows]


def try_values(session: Session, run_id: int, task_label: str, try_number: int) -> Doc:
    """What one try rendered (its templated fields, as `ledger tasks rendered` shows them) and passed on (its XCom
    rows, as `ledger tasks xcom`), every secret ledger knows of as ***. `task_label`: the task id, or `task[i]`
    for mapped instance i. ConfigError when a stored secret cannot be decrypted."""
    from ledger.services.secrets import known_secrets, mask_value
    from ledger.store import xcom as xcom_store

    name, index = split_label(task_label)
    rendered = next((t.rendered for t in xcom_store.rendered_tries(session, run_id, name, index)
                     if t.try_number == try_number), None)
    secrets = known_secrets(session) if rendered else frozenset()
    return {"rendered": {k: mask_value(v, secrets) for k, v in (rendered or {}).items()},
            "xcom": [x for x in xcom_rows(session, run_id, name, index) if x["try_number"] == try_number]}


# -- DAGs and their versions ----------------------------------------------------------------------------


def dag_json(d: Dag, about: Doc | None = None) -> Doc:
    """A row of `ledger dags list --json` (`about`: an Airflow DAG's display name, description, owner, tags...,
    from its current version, when it has any)."""
    return {"dag_id": d.dag_id, "fileloc": d.fileloc, "schedule": d.schedule, "timezone": d.timezone,
            "version": d.current_version, "is_paused": d.is_paused,
            "stop_queued": bool(d.is_paused and d.hold_queued),  # paused with --stop-queued
            **({"about": about} if about else {})}


def about_of(session: Session, d: Dag) -> Doc | None:
    """The `about` of a DAG's current version (None: it has none)."""
    if not d.current_version:
        return None
    found = json.loads(dag_store.version(session, d.dag_id, d.current_version).structure).get("about")
    return found if isinstance(found, dict) else None


def about_lines(about: Doc) -> list[str]:
    """What `ledger dags show` prints of a version's `about` (an Airflow DAG's display name, description,
    owner, tags, docs and notes)."""
    lines = [f"{name} {about[key]}" for key, name in (("display_name", "display name"),
                                                      ("description", "description"), ("owner", "owner"))
             if about.get(key)]
    if about.get("tags"):
        lines.append("tags " + ", ".join(about["tags"]))
    lines += [f"note: {note}" for note in about.get("notes", [])]
    if about.get("ignored_dag_args"):
        lines.append("ignored DAG arguments (accepted for Airflow compatibility, no effect in ledger): "
                     + ", ".join(about["ignored_dag_args"]))
    if about.get("doc_md"):
        lines += ["doc_md:", *("  " + line for line in str(about["doc_md"]).splitlines())]
    return lines



def import_error_json(e: ImportError_) -> Doc:
    """A row of `ledger dags errors --json`."""
    return {"file": e.fileloc, "error": e.error, "at": iso(e.at)}


def legacy_name(fileloc: str | None) -> str:
    """The name a version from before code was captured gives its DAG file (its file's base name)."""
    return os.path.basename(fileloc) if fileloc and fileloc != "?" else "dag.py"


def schedule_text(structure: Doc) -> str:
    """The schedule of a version's structure as people write it: '@daily', '0 6 * * *', 'every 1:00:00'."""
    start = pendulum.parse(structure["start_date"])
    assert isinstance(start, pendulum.DateTime)
    try:
        return schedule_summary(read_schedule(structure["schedule"], timezone=structure["timezone"],
                                                          start_date=start).summary(), structure.get("datasets"))
    except Exception:
        return json.dumps(structure["schedule"])



def code_files(session: Session, dag: Dag, v: DagVersion) -> list[str]:
    """The files of a version's code (relative paths), without reading their text."""
    if v.code_snapshot:
        return sorted(code_store.manifest_of(session, v))
    return [legacy_name(dag.fileloc)] if v.source_code is not None else []


def versions_document(session: Session, dag: Dag) -> list[Doc]:
    """`ledger dags versions DAG --json`: every version, oldest first, with its runs and tries."""
    used = dag_store.usage(session, dag.dag_id)
    rows = []
    for v in dag_store.versions(session, dag.dag_id):
        structure = json.loads(v.structure)
        runs, tries = used.get(v.version_hash, (0, 0))
        code = code_json(session, v)
        code["files"] = code_files(session, dag, v)
        rows.append({"version": v.version_hash, "created_at": iso(v.created_at),
                     "current": v.version_hash == dag.current_version,
                     "tasks": [t["task_id"] for t in structure["tasks"]],
                     "schedule": structure["schedule"], "schedule_text": schedule_text(structure),
                     "runs": runs, "tries": tries, "code": code})
    return rows


def version_texts(session: Session, dag: Dag, v: DagVersion) -> dict[str, str]:
    """relative path -> text of every file of a version's code."""
    return code_store.version_texts(session, v, legacy_name(dag.fileloc))


def version_document(session: Session, dag: Dag, ref: str | None, *, source: bool = False,
                     file: str | None = None) -> Doc:
    """`ledger dags show DAG [--version REF] [--source [--file F]] --json`: a version's structure and code;
    with `source`, the text of its DAG file (or of `file`)."""
    row = dag_store.version(session, dag.dag_id, ref or dag.current_version or "")
    code = code_json(session, row)
    code["files"] = code_files(session, dag, row)
    doc: Doc = {"dag_id": dag.dag_id, "version": row.version_hash, "created_at": iso(row.created_at),
                "structure": masked(json.loads(row.structure)), "code": code}
    if not source:
        return doc
    texts = version_texts(session, dag, row)
    if not texts:
        raise InvalidInput(f"version {row.version_hash[:12]} of {dag.dag_id} has no stored code "
                           "(it was registered before ledger kept it)")
    if file is not None and file not in texts:
        raise InvalidInput(f"version {row.version_hash[:12]} of {dag.dag_id} has no file {file!r}; it has: "
                           + ", ".join(sorted(texts)))
    chosen = file or row.code_entry or legacy_name(dag.fileloc)
    return {**doc, "source_code": texts.get(chosen), "file": chosen}


def version_diff(session: Session, dag: Dag, old: DagVersion, new: DagVersion) -> str:
    """`ledger dags diff`: a unified diff of two versions' code (file by file) and of their structure;
    empty when they are the same."""
    a, b = old.version_hash[:12], new.version_hash[:12]
    a_code, b_code = version_texts(session, dag, old), version_texts(session, dag, new)
    before = json.loads(old.structure)  # secret-looking arguments as ***, `*** (changed)` where they differ
    a_struct, b_struct = (json.dumps(s, indent=2, sort_keys=True)
                          for s in (masked(before), masked(json.loads(new.structure), compare_to=before)))
    dag_id = dag.dag_id
    parts = []
    if a_code and b_code:
        for path in sorted(set(a_code) | set(b_code)):
            parts.append(difflib.unified_diff(
                a_code.get(path, "").splitlines(keepends=True), b_code.get(path, "").splitlines(keepends=True),
                f"{dag_id}@{a}/{path}" if path in a_code else "/dev/null",
                f"{dag_id}@{b}/{path}" if path in b_code else "/dev/null"))
    parts.append(difflib.unified_diff((a_struct + "\n").splitlines(keepends=True),
                                      (b_struct + "\n").splitlines(keepends=True),
                                      f"{dag_id}@{a} (structure)", f"{dag_id}@{b} (structure)"))
    return "".join(line for part in parts for line in part)


def next_runs_document(session: Session, dag_id: str, *, now: pendulum.DateTime, n: int) -> list[Doc]:
    """`ledger dags next-runs DAG --json`: the next `n` intervals the scheduler will create."""
    spec = dag_store.current_spec(session, dag_id)
    latest = run_store.latest_scheduling_run(session, dag_id)
    after = DataInterval(latest.data_interval_start, latest.data_interval_end) if latest else None  # type: ignore[arg-type]
    held = run_store.live_dates_from(session, dag_id, latest.logical_date if latest else None)
    intervals = next_scheduled(spec.schedule, start_date=spec.start_date, end_date=spec.end_date,
                               after=after, now=now, catchup=spec.catchup, held=held, n=n)
    return [{"logical_date": iso(i.logical_date), "data_interval_start": iso(i.start),
             "data_interval_end": iso(i.end)} for i in intervals]


# -- lineage --------------------------------------------------------------------------------------------


def write_json(row: Any) -> Doc:
    """A write a try recorded (lineage_write), as `ledger lineage --json` lists it (`source`: write)."""
    w = row[0]
    return {"source": "write", "event_id": None, "run_id": str(w.run_id), "dag_id": w.dag_id,
            "task_id": w.task_id, "try_number": w.try_number, "try_state": w.try_state, "dag_version": w.dag_version,
            "run_type": row.run_type, "run_state": row.run_state, "overridden_by": id_text(row.overridden_by),
            "logical_date": iso(row.logical_date), "rows": w.rows, "path": w.path, "written_at": iso(w.written_at)}


def event_write_json(row: Any) -> Doc:
    """A dataset event of a producer's successful try, as `ledger lineage --json` lists it (`source`: event)."""
    e = row[0]
    return {"source": "event", "event_id": str(e.id), "run_id": str(e.run_id), "dag_id": e.dag_id,
            "task_id": e.task_id, "try_number": e.try_number, "try_state": "success", "dag_version": row.dag_version,
            "run_type": row.run_type, "run_state": row.run_state, "overridden_by": id_text(row.overridden_by),
            "logical_date": iso(row.logical_date), "rows": None, "path": None, "written_at": iso(e.created_at)}


def lineage_document(session: Session, dataset: str, partition: str | None = None) -> list[Doc]:
    """`ledger lineage DATASET [--partition P] --json`: per partition, the current write and every write, oldest
    first: the writes tries recorded, and the dataset events of producers' tries (those of a try that recorded
    writes of the dataset are its writes, already listed). An unpartitioned dataset's events have partition null."""
    writes = lineage_store.history(session, dataset, partition)
    wrote = {(w[0].run_id, w[0].task_id, w[0].try_number) for w in writes}
    events = [e for e in lineage_store.event_history(session, dataset, partition)
              if (e[0].run_id, e[0].task_id, e[0].try_number) not in wrote]
    if not writes and not events:
        known = lineage_store.datasets(session)
        if partition is not None and dataset in known:
            raise NotFound(f"no recorded write of partition {partition!r} of dataset {dataset!r}; "
                           f"`ledger lineage {dataset}` lists its partitions")
        hint = f"; known datasets: {', '.join(known)}" if known else "; no task has recorded a write yet"
        what = f"partition {partition!r} of " if partition else ""
        raise NotFound(f"no recorded write of {what}dataset {dataset!r}{hint}")
    parts: dict[str | None, list[Doc]] = {}
    found = [(w[0].partition, w[0].written_at, write_json(w)) for w in writes] + [
        (e[0].partition, e[0].created_at, event_write_json(e)) for e in events]
    for part, _at, doc in sorted(found, key=lambda f: (f[0] or "", f[1])):  # (stable: writes by id, then events)
        parts.setdefault(part, []).append(doc)
    result = []
    for name, history in parts.items():
        ok = [w for w in history if w["try_state"] == "success"]
        result.append({"dataset": dataset, "partition": name, "current": ok[-1] if ok else None,
                       "history": history})
    return result


# -- backfills ------------------------------------------------------------------------------------------


def backfill_json(session: Session, b: Backfill) -> Doc:
    """A row of `ledger backfill list --json`: range, policy, state, and what became of its runs."""
    h = backfill_store.history_of(session, b.id)
    p = backfill_store.progress_of(session, b.id)  # its live runs now (runs, runs_done, runs_failed)
    return {"backfill_id": str(b.id), "dag_id": b.dag_id, "start": iso(b.range_start), "end": iso(b.range_end),
            "reprocess": b.reprocess,  # the state its live runs give now (one cleared or marked since may change it)
            "state": agreed_state(b.state, unfinished=p.runs_total - p.runs_done, failed=p.runs_failed),
            "requested_by": b.requested_by,
            "created_at": iso(b.created_at), "ended_at": iso(b.ended_at), "submit": b.submit_only,
            "planned": backfill_store.planned_of(session, b.id), "created": h.created,
            "overridden_later": h.overridden, "succeeded": h.succeeded, "failed": h.failed,
            "unfinished": h.unfinished, "runs": p.runs_total, "runs_done": p.runs_done, "runs_failed": p.runs_failed,
            "downstream": bool(b.downstream), "max_active_runs": b.max_active_runs}


def backfills_document(session: Session) -> list[Doc]:
    """`ledger backfill list --json`: every backfill, newest first."""
    return [backfill_json(session, b) for b in backfill_store.listing(session)]


def backfill_document(session: Session, backfill_id: int) -> Doc:
    """`ledger backfill show ID --json`: one backfill and each run it created."""
    b = backfill_store.get(session, backfill_id)
    doc = backfill_json(session, b)
    doc["runs"] = [{"run_id": str(r.id), "logical_date": iso(r.logical_date), "state": r.state,
                    "overridden_by": id_text(r.overridden_by)} for r in backfill_store.runs_of(session, backfill_id)]
    return doc

