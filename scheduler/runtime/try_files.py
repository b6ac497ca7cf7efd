"""What a try leaves beside its log: the values it passed on (XCom), its rendered templates and the partitions
it wrote (lineage). The job reads them before the transaction that records the try's end, so that no file is
read while the database's write lock is held; a worker says which of them a try left, so that the scheduler
opens only those (for most tries: none). Workers import this module: it must not import the database layer."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from ledger.sdk.xcom import read_json_lines, read_pushed, read_rendered

XCOM, RENDERED, WRITES = ".xcom.jsonl", ".rendered.json", ".writes.jsonl"  # appended to the try's log path
SUFFIXES = (XCOM, RENDERED, WRITES)


@dataclass(frozen=True, slots=True)
class TryFiles:
    pushed: list[tuple[str, Any]] = field(default_factory=list)  # (key, value) in the order pushed
    rendered: dict[str, Any] | None = None  # None: it rendered nothing (or the file is unreadable)
    writes: list[dict[str, Any]] = field(default_factory=list)
    outlets: list[dict[str, Any]] = field(default_factory=list)  # context.outlet_events: extra, alias additions
    log: str | None = None  # a try that ran on another host: its whole log, kept with its end (database or store)
    here: bool = True  # read from files beside the log on this host, removed once recorded (False: they came back
    # with a remote try's outcome, and its worker removed its own)


NOTHING = TryFiles()


def read_writes(path: str) -> list[dict[str, Any]]:
    """The partitions a try recorded writing, from its JSON-lines file (missing file: none; bad lines are
    skipped)."""
    return [item for item in read_json_lines(path)
            if isinstance(item, dict) and item.get("dataset") and item.get("partition")]


def read_outlet_events(path: str) -> list[dict[str, Any]]:
    """What a try said of its outlets' events (`context.outlet_events`), from the same file as its writes."""
    return [item for item in read_json_lines(path) if isinstance(item, dict) and item.get("outlet")]


def present(log_path: str) -> tuple[str, ...]:
    """The suffixes of the files a try left beside `log_path` (asked by its worker once the try has ended)."""
    return tuple(suffix for suffix in SUFFIXES if os.path.exists(log_path + suffix))


def read(log_path: str, found: tuple[str, ...] | None = None) -> TryFiles:
    """The files a try left. `found`: the suffixes its worker saw (None: not known, every one is looked for)."""
    look = SUFFIXES if found is None else found
    if not look:
        return NOTHING
    return TryFiles(read_pushed(log_path + XCOM) if XCOM in look else [],
                    read_rendered(log_path + RENDERED) if RENDERED in look else None,
                    read_writes(log_path + WRITES) if WRITES in look else [],
                    read_outlet_events(log_path + WRITES) if WRITES in look else [])


def remove(log_path: str) -> None:
    """Remove the files a try left beside `log_path`, once what they held is recorded in the database: they may
    hold values a task passed on (secrets among them), which must not stay readable on disk."""
    for suffix in SUFFIXES:
        with contextlib.suppress(OSError):  # (gone already; a read-only folder: the record is complete anyway)
            os.unlink(log_path + suffix)
