"""The report of a finished try: what every executor hands the job, built by the try's own process.

The try's process notes what its code passes on (XCom), the templates it rendered, the partitions it wrote and its
outlets' events in its own memory as they are made (ledger/sdk/try_outputs.py). The moment its code has returned or
raised, it builds its TryReport from them (`build`) and hands it to its worker through one file: for a Celery try,
the worker's outbox file, written whole (a temporary file renamed over) and fsynced, so that the outcome survives the
worker from that moment (decision 0257); for a local or sequential try, `<log>.report.json`, written in place (a torn
one is no report: decision 0323), which the worker reads and removes once the process is gone (`ReportFile`), or, when
the worker or the scheduler died first, the executor or the next scheduler's executor does (decision 0298: a try that
left its report is recorded by it). Only then does the
process write its log's outcome line, mask the secrets in its log and exit. The report travels back with the try's
end (the local worker's pipe, the Celery result) and the job records it through the guarded transitions without
opening any file (decisions 0241, 0253).

A report is a frozen dataclass of plain values: it pickles (the pipe) and converts to and from JSON (`as_json`,
`from_json`, for Celery's result backend), with a version so that a worker and a scheduler of different releases
refuse each other's reports with one line instead of misreading them. Workers import this module: it must not
import the database layer.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ledger.sdk import secrets, try_outputs
from ledger.sdk.xcom import read_json_lines

VERSION = 1  # of the report's JSON form: as_json writes it, from_json refuses any other
WRITES = try_outputs.OTHERS  # appended to the try's log path: what the try's other processes noted
REPORT = ".report.json"  # appended to the try's log path: a local try's report file


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
        pushed = data.get("pushed")
        return cls(data["state"], data.get("reason"), float(data.get("at") or 0.0), str(data.get("log_path") or ""),
                   data.get("host"), tuple((str(k), v) for k, v in pushed) if pushed else (), data.get("rendered"),
                   tuple(data.get("writes") or ()), tuple(data.get("outlets") or ()), data.get("log"))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its fields, in order (the local worker's pipe): dataclass's own way for a frozen class with slots
        reads the fields' list on both sides."""
        return TryReport, (self.state, self.reason, self.at, self.log_path, self.host, self.pushed, self.rendered,
                           self.writes, self.outlets, self.log, self.version)

    def with_log(self, log: str | None) -> TryReport:
        return replace(self, log=log)

    @property
    def left_anything(self) -> bool:
        return bool(self.pushed or self.rendered is not None or self.writes or self.outlets)


def build(state: str, reason: str | None, at: float, log_path: str, host: str | None = None,
          outputs: try_outputs.Outputs | None = None) -> TryReport:
    """The report of the try this process ran (its notes: `outputs`, else the current ones, taken), as it ended
    (`state`, `reason`, at `at`); what the try's other processes noted (LEDGER_WRITES_PATH) is taken in and its file
    removed. Values are masked where they show the secrets the try read (its rendered templates)."""
    noted = outputs if outputs is not None else try_outputs.end()
    pushed: list[tuple[str, Any]] = []
    writes: list[Any] = []
    rendered = None
    if noted is not None:
        pushed = [(key, json.loads(text)) for key, text in noted.pushed]
        writes = list(noted.writes)
        rendered = noted.rendered
    if log_path and os.access(log_path + WRITES, os.F_OK):  # (no exception made when there is none: most tries)
        for line in read_json_lines(log_path + WRITES):
            if isinstance(line, dict) and isinstance(line.get("xcom"), str) and "value" in line:
                pushed.append((line["xcom"], line["value"]))
            else:
                writes.append(line)
        with contextlib.suppress(OSError):
            os.unlink(log_path + WRITES)
    if rendered is not None and secrets.secrets_seen():
        rendered = json.loads(secrets.mask(json.dumps(rendered)))
    if not writes:  # (most tries)
        return TryReport(state, reason, at, log_path, host, pushed=tuple(pushed), rendered=rendered)
    return TryReport(
        state, reason, at, log_path, host, pushed=tuple(pushed), rendered=rendered,
        writes=tuple(i for i in writes if isinstance(i, dict) and i.get("dataset") and i.get("partition")),
        outlets=tuple(i for i in writes if isinstance(i, dict) and i.get("outlet")))


# The JSON text of a report that left nothing but how it ended (most tries'), as json.dumps writes it: filled in
# without the json module, whose objects a forked try's process would otherwise touch (and copy) to write it.
_BARE_AT = '", "reason": null, "at": '
_BARE_PATH = ', "log_path": "'
_BARE_TAIL = '", "host": null, "pushed": [], "rendered": null, "writes": [], "outlets": [], "log": null}'
_BARE = '{"version": %d, "state": "%s' + _BARE_AT + '%r' + _BARE_PATH + '%s' + _BARE_TAIL
_BARE_HEAD = f'{{"version": {VERSION}, "state": "'  # (a report of this release's version)


def _plain(text: str) -> bool:
    """Whether `text` is a JSON string's content as it stands (json.dumps escapes nothing in it)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def dumps(report: TryReport) -> bytes:
    """A report's JSON text. Its values came through JSON already (try_outputs keeps them so), so the plain encoder
    takes them; repr() stands for any that did not. A report of nothing but a state, a time and a plain log path is
    written from a template, the same text (decision 0323)."""
    if (report.reason is None and report.host is None and report.log is None and not report.left_anything
            and _plain(report.state) and _plain(report.log_path) and math.isfinite(report.at)):
        return (_BARE % (report.version, report.state, float(report.at), report.log_path)).encode()
    data = report.as_json()
    try:
        return json.dumps(data).encode()
    except (TypeError, ValueError):
        return json.dumps(data, default=repr).encode()


def from_bare(text: str, log_path: str) -> TryReport | None:
    """The report `dumps` wrote from its template for the try whose log is `log_path`, read back without the json
    module, whose objects the worker that forks each try would otherwise touch (and the next fork write-protect)
    to read it (decision 0334); None for any other text (read it as JSON): the same report as `from_json` gives."""
    if not text.startswith(_BARE_HEAD) or not _plain(log_path):
        return None
    tail = len(_BARE_PATH) + len(log_path) + len(_BARE_TAIL)
    if text[-tail:] != f"{_BARE_PATH}{log_path}{_BARE_TAIL}":
        return None
    state, found, at = text[len(_BARE_HEAD):-tail].partition(_BARE_AT)
    if not found or not _plain(state):
        return None
    try:
        value = float(at)
    except ValueError:
        return None
    if not math.isfinite(value) or repr(value) != at:  # (what float() reads beyond JSON's numbers: "nan", "1_0")
        return None
    return TryReport(state, None, value, log_path)


def write_whole(path: str, data: bytes, *, durable: bool) -> None:
    """Write `path` whole or not at all: a temporary file beside it, renamed over it (`durable`: then the file and
    its folder fsynced, so that it survives the host as well as the process). The rename comes before the fsyncs: the
    file is there for every process of the host (a guard, a worker's next incarnation) the moment it is written, not
    once a busy disk has taken it (decision 0253); a host that crashes between the two may leave it empty, which a
    reader takes for no file."""
    folder = os.path.dirname(path) or "."
    tmp, fd = _temporary(folder, f".{os.path.basename(path)}.{os.getpid()}")
    try:
        os.write(fd, data)
        os.replace(tmp, path)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    if durable:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_in_place(path: str, data: bytes) -> None:
    """Write `path` in place: one open, one write (more only if the kernel takes part of it), no temporary name
    (decision 0323). For a report's JSON text, which no cut short prefix of is: a file torn by a kill or a full disk
    reads as no report, as a missing one does (and one torn by a full disk is removed here)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:  # no folder yet
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, flags, 0o600)
    try:
        written = os.write(fd, data)
        while written < len(data):
            written += os.write(fd, data[written:])
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)


def _temporary(folder: str, prefix: str) -> tuple[str, int]:
    """A new file in `folder` (made when missing), named `prefix` (a process's own name, free unless a process of the
    same pid left it behind), else `prefix` and a random part: (its path, an fd open to write it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for name in (prefix, f"{prefix}.{uuid.uuid4().hex}"):
        path = os.path.join(folder, name)
        try:
            return path, os.open(path, flags, 0o600)
        except FileNotFoundError:  # no folder yet
            os.makedirs(folder, exist_ok=True)
            return path, os.open(path, flags, 0o600)
        except FileExistsError:
            continue
    path = os.path.join(folder, f"{prefix}.{uuid.uuid4().hex}")
    return path, os.open(path, flags, 0o600)


class Drop(Protocol):
    """Where a forked try's process leaves its report for its worker: `leave` in the try's process, once its code
    has ended; `take` in the worker, once the process is gone (None: it left none: it was killed or crashed first)."""

    @property
    def host(self) -> str | None:
        """The worker's name, for the report (None: the scheduler's host)."""

    def leave(self, report: TryReport) -> None: ...

    def settle(self) -> None:
        """In the try's process, after `leave` and its log's foot (flushed), last before it exits."""

    def take(self) -> TryReport | None: ...


class ReportFile:
    """A local or sequential try's report: `<log>.report.json`, written in place (not fsynced: the try's worker is
    on the same host and reads it once the process is gone; a torn one is none), removed once read."""

    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.path = log_path + REPORT
        self.host: str | None = None

    def leave(self, report: TryReport) -> None:
        write_in_place(self.path, dumps(report))

    def settle(self) -> None:
        """(Nothing: the worker reads the file once the process is gone.)"""

    def take(self) -> TryReport | None:
        """The report, removed from this host once read whole (a report this release cannot read too)."""
        try:
            text = _read(self.path).decode()  # (a str: json.loads would work out a bytes' encoding)
            bare = from_bare(text, self.log_path)  # (most tries': the template's text, read without json)
            data = json.loads(text) if bare is None else None
        except (OSError, ValueError):
            return None
        self.remove()
        if bare is not None:
            return bare
        try:
            return TryReport.from_json(data)
        except ReportRefused:
            return None

    def read(self) -> TryReport | None:
        """The report, left in place (None: none, a torn one, or one this release cannot read)."""
        try:
            with open(self.path, "rb") as f:
                return TryReport.from_json(json.loads(f.read()))
        except (OSError, ValueError):  # (ReportRefused is a ValueError)
            return None

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _read(path: str) -> bytes:
    """A small file's bytes, read with the fewest objects made: the worker that forks each try reads one per try."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def left_behind(log_path: str, state: str, reason: str | None, at: float, host: str | None = None) -> TryReport:
    """The report of a try that left none (killed, or gone before its code ended): how it ended, and nothing it
    made; what its other processes noted, and any report file, removed from this host."""
    for suffix in (WRITES, REPORT):
        with contextlib.suppress(OSError):
            if log_path:
                os.unlink(log_path + suffix)
    return TryReport(state, reason, at, log_path, host)


def of_try(left: TryReport | None, log_path: str, state: str, reason: str | None, at: float,
           host: str | None = None) -> TryReport:
    """The report a try left (as it left it: its code ended, whatever happened to its process afterwards), or
    `left_behind` when it left none."""
    return left if left is not None else left_behind(log_path, state, reason, at, host)
