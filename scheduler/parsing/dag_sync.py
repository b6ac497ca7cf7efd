"""Writing DAG file parse results to the database: versions, active DAGs, import errors, DagFile rows.

Everything happens inside the caller's transaction (nothing here commits). A file whose content hash
is the stored one and whose DAGs' versions are the current ones is not re-serialised: only its
`last_parsed_at` moves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from ledger.infra.code import sha256_bytes
from ledger.models import Dag, DagFile, ImportError_
from ledger.scheduler.parsing.dag_processing import ParseResult
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store.dags import known_dependencies, known_hashes, known_owners

__all__ = ["SyncReport", "known_dependencies", "known_hashes", "known_owners", "read_code", "sync_parsed",
           "sync_results"]

@dataclass
class SyncReport:
    """What one sync changed (file paths and dag ids), for logs and tests."""

    files: int = 0
    new_versions: list[str] = field(default_factory=list)  # dag_ids that got a new version row
    registered: list[str] = field(default_factory=list)  # dag_ids written (new or not)
    unchanged: list[str] = field(default_factory=list)  # files skipped: same content, same versions
    errors: list[str] = field(default_factory=list)  # files whose import error was stored
    cleared: list[str] = field(default_factory=list)  # files whose import error was removed
    deactivated: list[str] = field(default_factory=list)  # dag_ids no longer defined
    deleted: list[str] = field(default_factory=list)  # files gone from the folder
    stale: list[str] = field(default_factory=list)  # files left out: changed after they were parsed

    def summary(self) -> str:
        return (f"{self.files} files: {len(self.new_versions)} new versions, {len(self.unchanged)} unchanged, "
                f"{len(self.errors)} import errors, {len(self.deactivated)} DAGs deactivated, "
                f"{len(self.deleted)} files deleted")


def code_needed(session: Session, results: Iterable[ParseResult]) -> dict[str, str]:
    """sha256 -> path of the files that versions not stored yet need and the database lacks."""
    wanted: dict[str, str] = {}
    pairs = {(d.dag_id, d.version_hash): d for r in results if not r.deleted for d in r.dags if d.code is not None}
    if not pairs:
        return wanted
    stored = dag_store.stored_versions(session, sorted({dag_id for dag_id, _ in pairs}))
    for key, parsed in pairs.items():
        if key in stored:
            continue
        assert parsed.code is not None and parsed.code_root is not None
        for rel, sha in parsed.code.files().items():
            wanted.setdefault(sha, os.path.join(parsed.code_root, rel))
    missing = code_store.missing_blobs(session, wanted)
    return {sha: path for sha, path in wanted.items() if sha in missing}


def read_code(needed: dict[str, str]) -> tuple[dict[str, bytes], set[str]]:
    """Read the needed files (outside any transaction). Returns (sha256 -> content, the shas whose file
    changed or vanished since it was parsed)."""
    contents: dict[str, bytes] = {}
    stale: set[str] = set()
    for sha, path in needed.items():
        try:
            data = Path(path).read_bytes()
        except OSError:
            stale.add(sha)
            continue
        if sha256_bytes(data) == sha:
            contents[sha] = data
        else:
            stale.add(sha)
    return contents, stale


def sync_parsed(sessions: sessionmaker[Session], results: list[ParseResult], *, now: datetime, actor: str
                ) -> SyncReport:
    """Write parse results with the code of their new versions: the files are read between a short read
    transaction (which blobs are missing) and the write transaction (no file I/O inside it)."""
    if not results:
        return SyncReport()
    with sessions.begin() as session:
        needed = code_needed(session, results)
    contents, stale = read_code(needed) if needed else ({}, set())
    with sessions.begin() as session:
        return sync_results(session, results, now=now, actor=actor, code=contents, stale=stale)


def sync_results(session: Session, results: Iterable[ParseResult], *, now: datetime, actor: str,
                 code: Mapping[str, bytes] | None = None, stale: Iterable[str] = ()) -> SyncReport:
    """Write parse results to the database in the caller's transaction (never commits).

    `code`: sha256 -> content of files new versions need (see sync_parsed); `stale`: shas whose file
    changed after it was parsed: a result that needs one is left out (its file is parsed again).
    When several results of one file are given, the last one is the file's state and the others are ignored.
    """
    results = list({r.fileloc: r for r in results}.values())
    stale = set(stale)
    if stale:
        report_stale = [r.fileloc for r in results
                        if any(d.code is not None and stale & set(d.code.files().values()) for d in r.dags)]
        results = [r for r in results if r.fileloc not in report_stale]
    if code:
        code_store.add_blobs(session, code)
    report = SyncReport(files=len(results))
    if stale:
        report.stale = report_stale
    if not results:
        return report
    locs = sorted({r.fileloc for r in results})
    dag_ids = sorted({d.dag_id for r in results for d in r.dags})

    # load what the batch touches in a few queries; register() then finds the Dag rows in the session
    files, errors, dags = dag_store.files_state(session, locs, dag_ids)
    of_file: dict[str, list[Dag]] = {}
    for dag in dags.values():
        of_file.setdefault(dag.fileloc, []).append(dag)

    to_clear: list[str] = []
    for res in results:
        fileloc = res.fileloc
        if res.deleted:
            _deactivate(session, report, fileloc, of_file.get(fileloc, []), present=set())
            if fileloc in errors:
                to_clear.append(fileloc)
            row = files.pop(fileloc, None)
            if row is not None:
                dag_store.delete_file(session, row)
            report.deleted.append(fileloc)
            continue

        row = files.get(fileloc)
        if _unchanged(res, row, dags, of_file.get(fileloc, []), errors.get(fileloc)):
            assert row is not None
            row.last_parsed_at = now
            for parsed in res.dags:
                dags[parsed.dag_id].last_parsed_at = now
            report.unchanged.append(fileloc)
            continue

        for parsed in res.dags:
            if dag_store.register(session, dag_id=parsed.dag_id, fileloc=fileloc, version_hash=parsed.version_hash,
                                  structure=parsed.structure, schedule=parsed.schedule, timezone=parsed.timezone,
                                  now=now, actor=actor, source_code=parsed.source_code, code=parsed.code):
                report.new_versions.append(parsed.dag_id)
            report.registered.append(parsed.dag_id)
        if res.error is None:
            if fileloc in errors:
                to_clear.append(fileloc)
            _deactivate(session, report, fileloc, of_file.get(fileloc, []), present={d.dag_id for d in res.dags})
        else:
            # the file's DAGs stay active with their last good version
            dag_store.set_import_error(session, fileloc, res.error, now)
            report.errors.append(fileloc)

        deps = list(res.depends_on) or None
        if row is None:
            files[fileloc] = dag_store.add_file(session, DagFile(fileloc=fileloc, content_hash=res.content_hash,
                                                                 last_parsed_at=now, depends_on=deps))
        else:
            row.content_hash, row.last_parsed_at, row.depends_on = res.content_hash, now, deps

    dag_store.clear_import_errors(session, to_clear)
    report.cleared = to_clear
    session.flush()
    return report


def _unchanged(res: ParseResult, row: DagFile | None, dags: dict[str, Dag], of_file: list[Dag],
               error: ImportError_ | None) -> bool:
    """Same content as stored, every DAG at its stored version, nothing to deactivate, error as stored."""
    if row is None or row.content_hash != res.content_hash:
        return False
    if res.error != (error.error if error is not None else None):
        return False
    present: set[str] = set()
    for parsed in res.dags:
        dag = dags.get(parsed.dag_id)
        if (dag is None or not dag.is_active or dag.fileloc != res.fileloc
                or dag.current_version != parsed.version_hash or dag.schedule != parsed.schedule
                or dag.timezone != parsed.timezone):
            return False
        present.add(parsed.dag_id)
    # a broken file keeps its DAGs active; a good one must not leave a DAG it no longer defines active
    return res.error is not None or not any(
        d.is_active and d.fileloc == res.fileloc and d.dag_id not in present for d in of_file)


def _deactivate(session: Session, report: SyncReport, fileloc: str, candidates: list[Dag], *,
                present: set[str]) -> None:
    """Deactivate the DAGs of `fileloc` not in `present` (only queries when there is one)."""
    gone = [d.dag_id for d in candidates if d.is_active and d.fileloc == fileloc and d.dag_id not in present]
    if gone:
        dag_store.deactivate_missing(session, present=present, fileloc=fileloc)
        report.deactivated.extend(gone)
