"""A worker's outbox (decision 0257): the outcome of a try, kept on the worker's own disk from the moment its process
has exited until Redis has taken it, so that it survives its pool process, its worker and Redis.

One file per try, `$LEDGER_HOME/outbox/<worker name>/<task id>.json`, written whole (a temporary file renamed over,
then fsynced with its folder) by the try's own process the moment its code has ended (`OutboxDrop`, decisions 0253
and 0315: the fsyncs come once its log is whole and its pool process told); by the pool process when the try left
none (it was killed: `lost`, or its code never ended), or the try's guard when the pool process died after the try's
process wrote its state but left no report. It holds the result the
worker stores as the try's SUCCESS state, the try's log path, and who wrote it (pid, incarnation). It is removed once
the state is stored. Files whose writer is gone are delivered by the worker's heartbeat thread: the next incarnation
of the same name, at its start, or the same one when only a pool process died. Delivering a file twice stores the
same state twice, which changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.scheduler.executors.celery_app import KEEP, log_key
from ledger.scheduler.runtime.try_report import TryReport, write_whole


def folder(home: Path, name: str) -> Path:
    return home / "outbox" / name


def keep(box: Path, tid: str, result: dict[str, Any], log_path: str, incarnation: str, *, sync: bool = True,
         writer: int | None = None) -> Path:
    """Write the outcome durably (fsynced file and folder; `sync` False: written, not fsynced, which survives the
    process but not the host); returns its path. `writer`: the process that delivers it (this one by default)."""
    path = box / f"{tid}.json"
    write_whole(str(path), json.dumps({"tid": tid, "result": result, "log": log_path,
                                       "pid": writer or os.getpid(), "incarnation": incarnation},
                                      default=repr).encode(), durable=sync)
    return path


def result_of(report: TryReport, pid: int, host: str) -> dict[str, Any]:
    """The result a worker stores as a try's SUCCESS state (the try's process `pid`), with its report."""
    return {"state": report.state, "reason": report.reason, "at": report.at, "pid": pid, "host": host,
            "report": report.as_json(), "log_bytes": 0, "log_rewritten": False}


class OutboxDrop:
    """A Celery try's report, left by the try's own process the moment its code has ended as its outcome in the
    worker's outbox (written and renamed into place: from then on it survives the try's process and its pool process,
    whose worker, or its next incarnation, delivers it). Once the try's log is whole, the try's process tells its pool
    process through a pipe made before the fork (`settle`: the pool process delivers the outcome from then on, while
    the try's process makes the file durable and exits, decision 0315). Its writer is the pool process (which
    delivers it while it lives)."""

    def __init__(self, box: Path, tid: str, log_path: str, incarnation: str, host: str) -> None:
        self.box, self.tid, self.log_path, self.incarnation, self.host = box, tid, log_path, incarnation, host
        self.writer = os.getpid()  # (made in the pool process, before the fork)
        self.ready_fd, self._ready_w = os.pipe()  # (the try's process writes one byte: its report and log are whole)
        os.set_blocking(self.ready_fd, False)

    @property
    def path(self) -> Path:
        return self.box / f"{self.tid}.json"

    def leave(self, report: TryReport) -> None:
        keep(self.box, self.tid, result_of(report, os.getpid(), self.host), self.log_path, self.incarnation,
             sync=False, writer=self.writer)

    def settle(self) -> None:
        """(In the try's process, its log whole.) Tell the pool process, then fsync the report and its folder: the
        outcome is durable once Redis has it or the fsyncs have returned, whichever comes first."""
        with contextlib.suppress(OSError):
            os.write(self._ready_w, b"!")
        sync(self.path)

    def forked(self) -> None:
        """(In the pool process, once the try's process is forked.) Only the try's process holds the write end."""
        _close(self._ready_w)
        self._ready_w = -1

    def ready(self) -> bool:
        """(In the pool process.) Has the try's process said its report and its log are whole? Its end closes the
        pipe without a word when it did not (it was killed): ready_fd is then closed, -1."""
        try:
            said = os.read(self.ready_fd, 1)
        except BlockingIOError:
            return False
        except OSError:
            said = b""
        if not said:
            self.close()
        return bool(said)

    def take(self) -> TryReport | None:
        try:
            return TryReport.from_json(json.loads(self.path.read_bytes())["result"]["report"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def close(self) -> None:
        _close(self.ready_fd)
        _close(self._ready_w)
        self.ready_fd = self._ready_w = -1


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def sync(path: Path) -> None:
    """fsync a file written already, then its folder (nothing when it is gone: delivered and forgotten)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def kept_one(box: Path, tid: str) -> tuple[Path, dict[str, Any]] | None:
    """The outcome of try `tid` in the outbox, if it is there."""
    path = box / f"{tid}.json"
    try:
        return path, json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


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
