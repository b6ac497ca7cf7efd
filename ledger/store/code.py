"""DAG versions' code in the database: content-addressed blobs, bundles of helper files, snapshots.

See ledger/infra/code.py for what a version's code is. Every function here runs in the caller's transaction.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from ledger.core.errors import InvalidInput
from ledger.infra.code import CodeManifest, parse_bundle, sha256_bytes
from ledger.models import CodeBlob, CodeBundle, DagVersion
from ledger.store.dialects import CONFLICT_DIALECTS, conflict_insert

CHUNK = 500


def missing_blobs(session: Session, shas: Iterable[str]) -> set[str]:
    """Which of these blobs the database does not hold yet."""
    wanted = sorted(set(shas))
    have: set[str] = set()
    for i in range(0, len(wanted), CHUNK):
        have.update(session.scalars(select(CodeBlob.sha256).where(CodeBlob.sha256.in_(wanted[i:i + CHUNK]))))
    return set(wanted) - have


def _insert_new(session: Session, table: Any, key: str, rows: list[dict[str, Any]]) -> None:
    """Insert rows whose key may already be there (another process may store the same content at the same
    moment): existing keys are left alone."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect in CONFLICT_DIALECTS:
        stmt: Any = conflict_insert(dialect)(table).on_conflict_do_nothing(index_elements=[key])
    else:
        stmt = insert(table)
    session.execute(stmt, rows)


def add_blobs(session: Session, contents: Mapping[str, bytes]) -> None:
    """Store file contents by sha256 (those already stored are left alone)."""
    rows = []
    for sha in sorted(missing_blobs(session, contents)):
        data = contents[sha]
        if sha256_bytes(data) != sha:
            raise ValueError(f"blob {sha[:12]} does not hash to its key")
        rows.append({"sha256": sha, "size": len(data), "data": zlib.compress(data, 6)})
    _insert_new(session, CodeBlob.__table__, "sha256", rows)


def add_manifest(session: Session, manifest: CodeManifest) -> None:
    """Store the bundle of a manifest's helper files (its blobs must be stored already)."""
    bundle_hash, text = manifest.bundle_hash, manifest.bundle_text
    if bundle_hash is None or text is None:
        return
    if session.get(CodeBundle, bundle_hash) is None:
        _insert_new(session, CodeBundle.__table__, "bundle_hash", [{"bundle_hash": bundle_hash, "manifest": text}])


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A version's code as files: what a worker materialises (scheduler/loop/code_cache.py)."""

    key: str  # the snapshot key (a legacy version: sha256 of its source text)
    entry: str  # the DAG file's path relative to the snapshot's root
    files: dict[str, bytes]  # relative path -> content, the entry included
    captured: bool  # False for versions registered before code was captured: only the DAG file's text


def snapshot_key_of(version: DagVersion, legacy_name: str = "dag.py") -> str | None:
    """The key of a version's snapshot without loading it (None: the version has no code). A version from
    before code was captured has only its DAG file's text, materialised as `legacy_name`."""
    if version.code_snapshot is not None:
        return version.code_snapshot
    if version.source_code is not None:
        return "legacy-" + sha256_bytes(f"{legacy_name}\0{version.source_code}".encode())
    return None


def blobs(session: Session, shas: Iterable[str]) -> dict[str, bytes]:
    wanted = sorted(set(shas))
    found: dict[str, bytes] = {}
    for i in range(0, len(wanted), CHUNK):
        for sha, data in session.execute(select(CodeBlob.sha256, CodeBlob.data)
                                         .where(CodeBlob.sha256.in_(wanted[i:i + CHUNK]))):
            found[sha] = zlib.decompress(data)
    missing = set(wanted) - set(found)
    if missing:
        raise InvalidInput(f"the database lacks code blob {sorted(missing)[0][:12]}")
    return found


def manifest_of(session: Session, version: DagVersion) -> dict[str, str]:
    """relative path -> sha256 of every file of a captured version (the entry included)."""
    assert version.code_entry is not None and version.code_entry_sha256 is not None
    files = {}
    if version.code_bundle is not None:
        text = session.scalar(select(CodeBundle.manifest).where(CodeBundle.bundle_hash == version.code_bundle))
        if text is None:
            raise InvalidInput(f"the database lacks code bundle {version.code_bundle[:12]}")
        files.update(parse_bundle(text))
    files[version.code_entry] = version.code_entry_sha256
    return files


def file_text(session: Session, version: DagVersion, relpath: str) -> str | None:
    """The text of one file of a captured version's code (None: the version has no such file)."""
    if version.code_snapshot is None or version.code_entry is None:
        return None
    sha = manifest_of(session, version).get(relpath)
    return None if sha is None else blobs(session, [sha])[sha].decode("utf-8")


def snapshot(session: Session, version: DagVersion, *, legacy_name: str = "dag.py") -> Snapshot | None:
    """The files of a version's code, or None when the version has none (not loaded from a file)."""
    key = snapshot_key_of(version, legacy_name)
    if key is None:
        return None
    if version.code_snapshot is None:
        assert version.source_code is not None
        return Snapshot(key, legacy_name, {legacy_name: version.source_code.encode("utf-8")}, captured=False)
    assert version.code_entry is not None
    manifest = manifest_of(session, version)
    contents = blobs(session, manifest.values())
    return Snapshot(key, version.code_entry, {path: contents[sha] for path, sha in manifest.items()}, captured=True)


def version_texts(session: Session, version: DagVersion, legacy_name: str = "dag.py") -> dict[str, str]:
    """relative path -> text of every file of a version's code (the DAG file of a legacy version only)."""
    snap = snapshot(session, version, legacy_name=legacy_name)
    if snap is None:
        return {}
    return {path: data.decode("utf-8", errors="replace") for path, data in sorted(snap.files.items())}


def describe(version: DagVersion) -> dict[str, object]:
    """What `--json` listings say about a version's code."""
    return {"captured": version.code_snapshot is not None, "entry": version.code_entry,
            "snapshot": version.code_snapshot, "bundle": version.code_bundle}

