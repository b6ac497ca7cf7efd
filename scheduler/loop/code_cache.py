"""Materialising DAG versions' code on this host: the folder a try imports its DAG file from.

Layout under `$LEDGER_HOME/code/`:

* `blobs/<sha[:2]>/<sha>`: each distinct file content once, read-only;
* `snapshots/<key>/`: one folder per version snapshot (ledger/infra/code.py), its files hard links to the blobs
  (copies where links are impossible), so a thousand DAGs sharing a 1 MB helper package cost 1 MB.

Both are written atomically (a temporary name, then a rename), so processes and tries on the host share
them without locks: a snapshot folder that exists is complete. Nothing in them is ever changed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sqlalchemy.orm import Session

from ledger.infra.code import sha256_bytes
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import loop as loop_store


@dataclass(frozen=True, slots=True)
class CodeLocation:
    """Where a version's code is on this host."""

    root: str  # the snapshot folder: first on sys.path while the try imports
    fileloc: str  # the DAG file inside it
    captured: bool  # False: a version from before helper modules were captured (its DAG file only)


def _safe(relpath: str) -> PurePosixPath:
    path = PurePosixPath(relpath)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"unsafe path in a code snapshot: {relpath!r}")
    return path


def _write_once(path: Path, data: bytes, mode: int = 0o444) -> None:
    """Write `path` atomically unless it exists."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def materialise(base: Path, snap: code_store.Snapshot) -> Path:
    """The snapshot's folder under `base` (created atomically when missing)."""
    final = base / "snapshots" / snap.key
    if final.is_dir():
        return final
    tmp = base / "snapshots" / f".tmp-{snap.key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        for rel, data in snap.files.items():
            sha = sha256_bytes(data)
            blob = base / "blobs" / sha[:2] / sha
            _write_once(blob, data)
            dest = tmp / _safe(rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(blob, dest)
            except OSError:  # another file system, or links not allowed: a read-only copy
                shutil.copyfile(blob, dest)
                os.chmod(dest, 0o444)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not "another process made it first"
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


@dataclass
class CodeCache:
    """Per process: (dag_id, version hash) -> where its code is on this host."""

    base: Path  # $LEDGER_HOME/code
    _known: dict[tuple[str, str], CodeLocation | None] = field(default_factory=dict)

    def locate(self, session: Session, dag_id: str, version_hash: str) -> CodeLocation | None:
        """Where the version's code is, materialising it when it is not on this host yet (reads the database
        in `session`; writes files only the first time a host needs a snapshot). None: the version has no
        stored code (a DAG registered in process, not from a file)."""
        key = (dag_id, version_hash)
        if key in self._known:
            return self._known[key]
        version = dag_store.find_version(session, dag_id, version_hash)
        found: CodeLocation | None = None
        if version is not None:
            legacy_name = "dag.py"
            if version.code_snapshot is None:
                fileloc = loop_store.dag_fileloc(session, dag_id)
                if fileloc and fileloc != "?":
                    legacy_name = os.path.basename(fileloc)
            snapshot_key = code_store.snapshot_key_of(version, legacy_name)
            if snapshot_key is not None:
                folder = self.base / "snapshots" / snapshot_key
                entry = version.code_entry or legacy_name
                if not folder.is_dir():
                    snap = code_store.snapshot(session, version, legacy_name=legacy_name)
                    assert snap is not None
                    folder = materialise(self.base, snap)
                found = CodeLocation(str(folder), str(folder / _safe(entry)), version.code_snapshot is not None)
        self._known[key] = found
        return found

