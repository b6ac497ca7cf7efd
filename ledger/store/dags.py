"""DAG rows, their versions, and import errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ledger.core.errors import DagNotFound
from ledger.core.versions import DagSpec, spec_from_json
from ledger.infra.code import CodeManifest
from ledger.models import Dag, DagFile, DagRun, DagVersion, ImportError_, TaskInstance, TaskTry
from ledger.sdk.timetables import TimetableSchedule, from_description
from ledger.store import code as code_store
from ledger.store import events
from ledger.store.run_reads import one_version

CHUNK = 500  # values per IN (...) clause

T = TypeVar("T")


def chunks(values: Sequence[T]) -> Iterator[Sequence[T]]:
    """`values` in slices of CHUNK, one per IN (...) clause."""
    for i in range(0, len(values), CHUNK):
        yield values[i:i + CHUNK]


def register(session: Session, *, dag_id: str, fileloc: str, version_hash: str, structure: str,
             schedule: str, timezone: str, now: datetime, actor: str, source_code: str | None = None,
             code: CodeManifest | None = None) -> bool:
    """Record that `fileloc` defines `dag_id` with this structure. Returns True when the version is new.

    A new version keeps its code: with `code`, the manifest of its file and helper files (their blobs must
    be stored already: ledger.store.code.add_blobs); without, `source_code`, the text of the file it was
    parsed from (DAGs registered in process, and versions from before code was captured)."""
    dag = session.get(Dag, dag_id)
    if dag is None:
        dag = Dag(dag_id=dag_id, fileloc=fileloc, schedule=schedule, timezone=timezone, is_paused=False,
                  is_active=True)
        session.add(dag)
        session.flush()
    dag.fileloc, dag.schedule, dag.timezone, dag.is_active, dag.last_parsed_at = (
        fileloc, schedule, timezone, True, now)
    if dag.current_version == version_hash:
        return False
    known = session.scalar(select(DagVersion.id).where(DagVersion.dag_id == dag_id,
                                                        DagVersion.version_hash == version_hash))
    previous = dag.current_version
    dag.current_version = version_hash
    if known is None:
        row = DagVersion(dag_id=dag_id, version_hash=version_hash, structure=structure, created_at=now,
                         source_code=source_code if code is None else None)
        if code is not None:
            code_store.add_manifest(session, code)
            row.code_entry, row.code_entry_sha256 = code.entry.relpath, code.entry.sha256
            row.code_bundle, row.code_snapshot = code.bundle_hash, code.snapshot
        session.add(row)
        events.record(session, "version_registered", at=now, actor=actor, dag_id=dag_id,
                      version=version_hash, previous_version=previous, fileloc=fileloc, schedule=schedule)
        return True
    events.record(session, "version_reverted", at=now, actor=actor, dag_id=dag_id, version=version_hash,
                  previous_version=previous, fileloc=fileloc)
    return False


def deactivate_missing(session: Session, *, present: set[str], fileloc: str | None = None) -> None:
    """Mark DAGs no longer defined (in `fileloc`, or anywhere) as inactive; their history stays."""
    stmt = select(Dag).where(Dag.is_active.is_(True))
    if fileloc is not None:
        stmt = stmt.where(Dag.fileloc == fileloc)
    for dag in session.scalars(stmt):
        if dag.dag_id not in present:
            dag.is_active = False


def set_import_error(session: Session, fileloc: str, error: str, now: datetime) -> None:
    row = session.scalar(select(ImportError_).where(ImportError_.fileloc == fileloc))
    if row is None:
        session.add(ImportError_(fileloc=fileloc, error=error, at=now))
    elif row.error != error:
        row.error, row.at = error, now


def clear_import_errors(session: Session, filelocs: list[str]) -> None:
    if filelocs:
        session.execute(delete(ImportError_).where(ImportError_.fileloc.in_(filelocs)))


def import_error_of(session: Session, fileloc: str) -> str | None:
    """The stored import error of one DAG file (None: it imported)."""
    return session.scalar(select(ImportError_.error).where(ImportError_.fileloc == fileloc))


def import_errors(session: Session) -> list[ImportError_]:
    return list(session.scalars(select(ImportError_).order_by(ImportError_.fileloc)))


def get(session: Session, dag_id: str, *, active_only: bool = True) -> Dag:
    dag = session.get(Dag, dag_id)
    if dag is None or (active_only and not dag.is_active) or dag.current_version is None:
        raise DagNotFound(dag_id, broken_files=int(session.scalar(select(func.count()).select_from(ImportError_))
                                                   or 0))
    return dag


def find(session: Session, dag_id: str) -> Dag | None:
    """The DAG row, active or not (None: never registered)."""
    return session.get(Dag, dag_id)


def timezones(session: Session, dag_ids: Collection[str]) -> dict[str, str]:
    """The time zone of each of these DAGs that has a row, active or not (a page of runs of several DAGs prints
    each DAG's dates in its own zone)."""
    if not dag_ids:
        return {}
    stmt = select(Dag.dag_id, Dag.timezone).where(Dag.dag_id.in_(sorted(dag_ids)))
    return {dag_id: zone for dag_id, zone in session.execute(stmt).tuples()}


def schedulable(session: Session, dag_ids: list[str] | None = None, *,
                paused: bool = False) -> list[tuple[str, str, str]]:
    """(dag_id, current version, fileloc) of the active, unpaused DAGs that have a version (of `dag_ids`, or
    all); `paused`: the paused ones too."""
    stmt = select(Dag.dag_id, Dag.current_version, Dag.fileloc).where(
        Dag.is_active.is_(True), Dag.current_version.is_not(None))
    if not paused:
        stmt = stmt.where(Dag.is_paused.is_(False))
    if dag_ids is not None:
        stmt = stmt.where(Dag.dag_id.in_(dag_ids))
    return [(dag_id, version, fileloc) for dag_id, version, fileloc in session.execute(stmt).tuples()
            if version is not None]


def paused_ids(session: Session, dag_ids: Iterable[str]) -> set[str]:
    """Those of `dag_ids` that are paused."""
    wanted = sorted(set(dag_ids))
    if not wanted:
        return set()
    return set(session.scalars(select(Dag.dag_id).where(Dag.dag_id.in_(wanted), Dag.is_paused.is_(True))))


def listing(session: Session, *, include_inactive: bool = False) -> list[Dag]:
    stmt = select(Dag).order_by(Dag.dag_id)
    if not include_inactive:
        stmt = stmt.where(Dag.is_active.is_(True))
    return list(session.scalars(stmt))


def versions(session: Session, dag_id: str) -> list[DagVersion]:
    return list(session.scalars(select(DagVersion).where(DagVersion.dag_id == dag_id)
                                .order_by(DagVersion.created_at, DagVersion.id)))


def version(session: Session, dag_id: str, version_hash: str) -> DagVersion:
    """A version by its full hash or an unambiguous prefix."""
    return one_version(list(session.scalars(select(DagVersion).where(
        DagVersion.dag_id == dag_id, DagVersion.version_hash.startswith(version_hash)))), dag_id, version_hash)


def find_version(session: Session, dag_id: str, version_hash: str) -> DagVersion | None:
    """A version by its full hash (None: not stored)."""
    return session.scalar(select(DagVersion).where(DagVersion.dag_id == dag_id,
                                                   DagVersion.version_hash == version_hash))


def usage(session: Session, dag_id: str) -> dict[str, tuple[int, int]]:
    """version hash -> (runs created on or moved to it, tries that ran its code)."""
    runs = {v: n for v, n in session.execute(select(DagRun.version_hash, func.count())
                                             .where(DagRun.dag_id == dag_id).group_by(DagRun.version_hash))}
    tries = {v: n for v, n in session.execute(
        select(TaskTry.dag_version, func.count()).join(TaskInstance, TaskInstance.id == TaskTry.task_instance_id)
        .where(TaskInstance.dag_id == dag_id, TaskTry.dag_version.is_not(None)).group_by(TaskTry.dag_version))}
    return {v: (runs.get(v, 0), tries.get(v, 0)) for v in {*runs, *tries} if v is not None}


_spec_cache: dict[tuple[str, str], DagSpec] = {}


def spec(session: Session, dag_id: str, version_hash: str) -> DagSpec:
    """The DagSpec of a stored version (versions never change, so they are cached per process)."""
    key = (dag_id, version_hash)
    found = _spec_cache.get(key)
    if found is None:
        text = session.scalar(select(DagVersion.structure).where(DagVersion.dag_id == dag_id,
                                                                 DagVersion.version_hash == version_hash))
        if text is None:
            raise DagNotFound(dag_id)
        found = _spec_cache[key] = _with_pinned_timetable(session, spec_from_json(version_hash, text,
                                                                                       timetables=from_description))
    return found


def _with_pinned_timetable(session: Session, found: DagSpec) -> DagSpec:
    """A version whose custom timetable comes from a module of its DAGs folder plans with the version's copy of
    that module (ledger/sdk/timetables.py), read here with the version."""
    schedule = found.schedule
    if not isinstance(schedule, TimetableSchedule) or schedule.module_file is None:
        return found
    version = session.scalar(select(DagVersion).where(DagVersion.dag_id == found.dag_id,
                                                      DagVersion.version_hash == found.version_hash))
    text = code_store.file_text(session, version, schedule.module_file) if version is not None else None
    return found if text is None else dataclasses.replace(found, schedule=schedule.pinned(text))


def current_spec(session: Session, dag_id: str) -> DagSpec:
    dag = get(session, dag_id)
    assert dag.current_version is not None
    return spec(session, dag_id, dag.current_version)


# DAG files: what the DAG file processors and the scheduler know of them (scheduler/parsing/dag_sync.py writes them)

def known_hashes(session: Session) -> dict[str, str]:
    """fileloc -> content hash of the files the database knows, to seed DagFileProcessorManager.

    Files that define active DAGs or have an import error but no DagFile row (written by the
    in-process CLI path) are included with an empty hash: they are parsed at once, and reported
    deleted if they are gone.
    """
    found = {fileloc: digest for fileloc, digest in session.execute(select(DagFile.fileloc, DagFile.content_hash))}
    for fileloc in session.scalars(select(Dag.fileloc).where(Dag.is_active.is_(True)).distinct()):
        found.setdefault(fileloc, "")
    for fileloc in session.scalars(select(ImportError_.fileloc)):
        found.setdefault(fileloc, "")
    return found


def known_dependencies(session: Session) -> dict[str, list[str]]:
    """fileloc -> the files whose change re-parses it, as stored by the latest sync."""
    return {fileloc: list(deps) for fileloc, deps in
            session.execute(select(DagFile.fileloc, DagFile.depends_on)) if deps}


def known_owners(session: Session) -> dict[str, str]:
    """dag_id -> fileloc of every active DAG: which file defined each DAG first, for duplicate detection."""
    return {dag_id: fileloc for dag_id, fileloc in
            session.execute(select(Dag.dag_id, Dag.fileloc).where(Dag.is_active.is_(True)))}


def stored_versions(session: Session, dag_ids: Sequence[str]) -> set[tuple[str, str]]:
    """(dag_id, version hash) of every stored version of these DAGs."""
    stored: set[tuple[str, str]] = set()
    for chunk in chunks(dag_ids):
        stored.update(session.execute(select(DagVersion.dag_id, DagVersion.version_hash)
                                      .where(DagVersion.dag_id.in_(chunk))).tuples())
    return stored


def files_state(session: Session, filelocs: Sequence[str], dag_ids: Sequence[str]
                ) -> tuple[dict[str, DagFile], dict[str, ImportError_], dict[str, Dag]]:
    """What a sync of these files touches, in a few queries: their DagFile rows and import errors by fileloc,
    and the Dag rows of these files or with these ids, by dag_id."""
    files: dict[str, DagFile] = {}
    errors: dict[str, ImportError_] = {}
    dags: dict[str, Dag] = {}
    for chunk in chunks(filelocs):
        files.update((f.fileloc, f) for f in session.scalars(select(DagFile).where(DagFile.fileloc.in_(chunk))))
        errors.update((e.fileloc, e) for e in
                      session.scalars(select(ImportError_).where(ImportError_.fileloc.in_(chunk))))
        dags.update((d.dag_id, d) for d in session.scalars(select(Dag).where(Dag.fileloc.in_(chunk))))
    for ids in chunks(dag_ids):
        dags.update((d.dag_id, d) for d in session.scalars(select(Dag).where(Dag.dag_id.in_(ids))))
    return files, errors, dags


def add_file(session: Session, row: DagFile) -> DagFile:
    session.add(row)
    return row


def delete_file(session: Session, row: DagFile) -> None:
    session.delete(row)
    session.flush()
