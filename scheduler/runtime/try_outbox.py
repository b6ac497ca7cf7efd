"""A worker's outbox (decision 0257): the outcome of a try, kept on the worker's own disk from the moment its process
has exited until Redis has taken it, so that it survives its pool process, its worker and Redis.

One file per try, `$LEDGER_HOME/outbox/<worker name>/<task id>.json`, written whole (a temporary file, fsynced, then
renamed over, and the folder fsynced) by whoever captured the outcome: the pool process that reaped the try, or the
try's guard when the pool process died first (scheduler/runtime/try_process.py: GroupGuard). It holds the result the
worker stores as the try's SUCCESS state, the try's log path, and who wrote it (pid, incarnation). It is removed once
the state is stored. Files whose writer is gone are delivered by the worker's heartbeat thread: the next incarnation
of the same name, at its start, or the same one when only a pool process died. Delivering a file twice stores the
same state twice, which changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler.executors.celery_app import KEEP, log_key


def folder(home: Path, name: str) -> Path:
    return home / "outbox" / name


def keep(box: Path, tid: str, result: dict[str, Any], log_path: str, incarnation: str, *, sync: bool = True) -> Path:
    """Write the outcome durably (fsynced file and folder; `sync` False: written, not fsynced, which survives the
    process but not the host); returns its path."""
    box.mkdir(parents=True, exist_ok=True)
    path = box / f"{tid}.json"
    tmp = box / f".{tid}.{os.getpid()}.{uuid.uuid4().hex}"
    data = json.dumps({"tid": tid, "result": result, "log": log_path, "pid": os.getpid(),
                       "incarnation": incarnation}).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not sync:
        return path
    dir_fd = os.open(box, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def kept(box: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The outcomes in the outbox (a file that cannot be read, half written by a writer killed before its rename
    cannot be one: only renamed files are read)."""
    found = []
    with contextlib.suppress(OSError):
        for path in sorted(box.glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                found.append((path, json.loads(path.read_bytes())))
    return found


def deliver(path: Path, entry: dict[str, Any], client: Any, store: Callable[[str, dict[str, Any]], None]) -> None:
    """Store one kept outcome (raises when Redis does not answer; the file stays): the try's whole log first, as a
    log sent whole again (the scheduler reads it whole), then the state; then the file is removed."""
    result = dict(entry["result"])
    try:
        with open(entry["log"], "rb") as log:
            whole = log.read()
    except OSError:
        whole = None
    if whole is not None:
        client.set(log_key(entry["tid"]), whole, ex=KEEP)
        result["log_rewritten"], result["log_bytes"] = True, len(whole)
    store(entry["tid"], result)
    forget(path)


def deliver_orphans(box: Path, client: Any, store: Callable[[str, dict[str, Any]], None],
                    alive: Callable[[int], bool]) -> list[str]:
    """Deliver the kept outcomes whose writer is gone (a pool process or guard that died before its outcome was
    stored, this worker's previous incarnation); returns their task ids. Raises when Redis does not answer."""
    done = []
    for path, entry in kept(box):
        if entry.get("pid") != os.getpid() and alive(int(entry.get("pid") or 0)):
            continue  # (its writer is delivering it)
        deliver(path, entry, client, store)
        done.append(str(entry["tid"]))
    return done
