"""The report of a finished try: what every executor hands the job, built where the try ran.

A try's own process tells its worker what it passed on (XCom), the templates it rendered, the partitions it wrote
and its outlets' events through files beside its log (`context` writes them as the task runs: ledger/sdk). Once the
try has ended, the worker that ran it (a LocalExecutor worker, the SequentialExecutor's process, a Celery worker)
reads them into a TryReport and removes them (they may hold values a task passed on, secrets among them): the
report travels back with the try's end (the local worker's pipe, the Celery result) and the job records it through
the guarded transitions without opening any file. The job never reads a try's files: a report that could not come
back (a worker that died with its try, a remote try whose host is gone) leaves the try `lost` with what its
executor knows (decision 0241).

A report is a frozen dataclass of plain values: it pickles (the pipe) and converts to and from JSON (`as_json`,
`from_json`, for Celery's result backend), with a version so that a worker and a scheduler of different releases
refuse each other's reports with one line instead of misreading them. Workers import this module: it must not
import the database layer.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from typing import Any

from ledger.sdk.xcom import read_json_lines, read_pushed, read_rendered

VERSION = 1  # of the report's JSON form: as_json writes it, from_json refuses any other
XCOM, RENDERED, WRITES = ".xcom.jsonl", ".rendered.json", ".writes.jsonl"  # appended to the try's log path
SUFFIXES = (XCOM, RENDERED, WRITES)


class ReportRefused(ValueError):
    """A report in a form this release does not read (another version, or not a report at all)."""


@dataclass(frozen=True, slots=True)
class TryReport:
    """How a try ended, as the worker that ran it saw it, and what it left."""

    state: str  # success, failed, skipped, up_for_reschedule, lost
    reason: str | None = None  # one line: "exit code 1", "timed out after 5.0 s"
    at: float = 0.0  # time.time() when its worker saw it end
    log_path: str = ""  # its log on the host that ran it
    host: str | None = None  # that host's (worker's) name; None: the scheduler's host
    pushed: tuple[tuple[str, Any], ...] = ()  # (key, value) in the order pushed
    rendered: dict[str, Any] | None = None  # None: it rendered nothing (or the file was unreadable)
    writes: tuple[dict[str, Any], ...] = ()  # the partitions it wrote (lineage)
    outlets: tuple[dict[str, Any], ...] = ()  # context.outlet_events: extra, alias additions
    log: str | None = None  # a try that ran on another host: its whole log, kept with its end (database or store)
    version: int = field(default=VERSION)

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "state": self.state, "reason": self.reason, "at": self.at,
                "log_path": self.log_path, "host": self.host, "pushed": [[k, v] for k, v in self.pushed],
                "rendered": self.rendered, "writes": list(self.writes), "outlets": list(self.outlets),
                "log": self.log}

    @classmethod
    def from_json(cls, data: Any) -> TryReport:
        """The report `as_json` wrote; ReportRefused for any other version or shape."""
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("state"), str):
            found = data.get("version") if isinstance(data, dict) else type(data).__name__
            raise ReportRefused(f"a try report of version {found!r}; this release reads version {VERSION}")
        return cls(data["state"], data.get("reason"), float(data.get("at") or 0.0), str(data.get("log_path") or ""),
                   data.get("host"), tuple((str(k), v) for k, v in data.get("pushed") or []), data.get("rendered"),
                   tuple(data.get("writes") or ()), tuple(data.get("outlets") or ()), data.get("log"))

    def with_log(self, log: str | None) -> TryReport:
        return replace(self, log=log)

    @property
    def left_anything(self) -> bool:
        return bool(self.pushed or self.rendered is not None or self.writes or self.outlets)


def collect(log_path: str, state: str, reason: str | None, at: float, host: str | None = None) -> TryReport:
    """The report of a try that ended (`state`, `reason`, at `at`), with what it left beside `log_path`, which is
    then removed from this host. Called where the try ran, once its process is gone."""
    if not log_path:
        return TryReport(state, reason, at, log_path, host)
    found = [suffix for suffix in SUFFIXES if os.path.exists(log_path + suffix)]
    if not found:  # (most tries)
        return TryReport(state, reason, at, log_path, host)
    writes = read_json_lines(log_path + WRITES) if WRITES in found else []
    report = TryReport(
        state, reason, at, log_path, host,
        pushed=tuple(read_pushed(log_path + XCOM)) if XCOM in found else (),
        rendered=read_rendered(log_path + RENDERED) if RENDERED in found else None,
        writes=tuple(i for i in writes if isinstance(i, dict) and i.get("dataset") and i.get("partition")),
        outlets=tuple(i for i in writes if isinstance(i, dict) and i.get("outlet")))
    for suffix in found:
        with contextlib.suppress(OSError):  # (gone already; a read-only folder: the report holds it all anyway)
            os.unlink(log_path + suffix)
    return report
