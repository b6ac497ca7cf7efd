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
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session

from ledger.infra import code_files
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import loop as loop_store


@dataclass(frozen=True, slots=True)
class CodeLocation:
    """Where a version's code is on this host."""

    root: str  # the snapshot folder: first on sys.path while the try imports
    fileloc: str  # the DAG file inside it
    captured: bool  # False: a version from before helper modules were captured (its DAG file only)


def materialise(base: Path, snap: code_store.Snapshot) -> Path:
    """The snapshot's folder under `base` (created atomically when missing)."""
    return code_files.materialise(base, snap.key, snap.files)


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
                found = CodeLocation(str(folder), str(folder / code_files.safe_path(entry)),
                                     version.code_snapshot is not None)
        self._known[key] = found
        return found

