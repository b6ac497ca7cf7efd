"""A version's code as files on a host: materialised once per snapshot, atomically, under `$LEDGER_HOME/code`
(for the scheduler's tries by scheduler/loop/code_cache.py, for a worker's by scheduler/runtime/celery_worker.py,
which has no database). File I/O only: no SQL."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ledger.infra.code import sha256_bytes


def safe_path(relpath: str) -> PurePosixPath:
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


def materialise(base: Path, key: str, files: Mapping[str, bytes]) -> Path:
    """The folder of snapshot `key` (its files: relative path -> content) under `base`, created atomically when
    missing: each file stored once by content in `base/blobs`, linked (or copied) into `base/snapshots/key`."""
    final = base / "snapshots" / key
    if final.is_dir():
        return final
    tmp = base / "snapshots" / f".tmp-{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        for rel, data in files.items():
            sha = sha256_bytes(data)
            blob = base / "blobs" / sha[:2] / sha
            _write_once(blob, data)
            dest = tmp / safe_path(rel)
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
