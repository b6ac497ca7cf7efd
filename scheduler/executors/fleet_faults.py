"""Faults of a Celery fleet as operators see them (issue 40, part 5): what talks to the broker, Redis or ledger's
webserver (the CeleryExecutor in the scheduler, `ledger worker` and its pool processes) says in one line when a kind
of its work starts failing and in one line when it works again, never once per retry, and counts both in the
metrics: `ledger_fleet_faults_total{component,kind}` and `ledger_fleet_recoveries_total{component,kind}`, with
`ledger_fleet_failing{component,kind}` 1 while it fails.

The kinds (the metrics' `kind` label), by component:

* executor (the scheduler's CeleryExecutor): send (messages to the broker), revoke (kill()'s revocations through
  the broker), read (the tries' states, logs and leases from Redis), adopt (the tries a new job takes over);
* worker (`ledger worker`'s main process): beat (its heartbeat entry in Redis);
* worker pool processes (component worker too): claim (a try's claim and start in Redis), code (a version's code
  from the webserver's worker API), log (a running try's log to Redis), lease (a try's lease renewals),
  outcome (a try's outcome to Redis), api (task code's calls to the webserver's worker API: signals, triggered
  runs, other runs' states, variables, connections; made in the try's own process and carried back to its pool
  process by a Relay).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any


class FleetCounters:
    """The fleet's fault metrics, in `registry` (None: in none, as a worker's processes count for the
    multiprocess collector of `ledger worker --metrics-port`). prometheus_client is imported here, not before: a
    worker chooses its multiprocess mode (PROMETHEUS_MULTIPROC_DIR) before the first import."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge

        self.faults = Counter("ledger_fleet_faults", "Times a kind of work with the broker, Redis or the webserver "
                              "started failing", ["component", "kind"], registry=registry)
        self.recoveries = Counter("ledger_fleet_recoveries", "Times a kind of work with the broker, Redis or the "
                                  "webserver worked again after failing", ["component", "kind"], registry=registry)
        self.failing = Gauge("ledger_fleet_failing", "1 while a kind of work with the broker, Redis or the webserver "
                             "fails", ["component", "kind"], registry=registry, multiprocess_mode="livemax")


class FaultNotes:
    """What fails now, by kind: `failed()` says one line when a kind starts failing, `works()` one when it works
    again; both counted in `counters` (when given). Thread-safe; cheap when nothing changes (a dict look-up)."""

    def __init__(self, component: str, say: Callable[[str], None], counters: FleetCounters | None = None) -> None:
        self.component, self.say, self.counters = component, say, counters
        self.failing: dict[str, str] = {}  # kind -> its last error
        self._lock = threading.Lock()

    def failed(self, kind: str, line: str, error: BaseException | str) -> bool:
        """`kind` failed with `error`; `line` (said once, when it starts failing) says what. True: it was working."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self._lock:
            new = kind not in self.failing
            self.failing[kind] = text
        if new:
            self.say(line.replace("{error}", text))
            if self.counters is not None:
                self.counters.faults.labels(self.component, kind).inc()
                self.counters.failing.labels(self.component, kind).set(1)
        return new

    def works(self, kind: str, line: str) -> bool:
        """`kind` worked: `line` said when it was failing. True: it was failing."""
        if kind not in self.failing:  # (the common case: no lock)
            return False
        with self._lock:
            was = self.failing.pop(kind, None) is not None
        if was:
            self.say(line)
            if self.counters is not None:
                self.counters.recoveries.labels(self.component, kind).inc()
                self.counters.failing.labels(self.component, kind).set(0)
        return was

    def error(self, kind: str) -> str | None:
        return self.failing.get(kind)


class Relay:
    """One kind of fault noted in processes this one forks (a try's process, whose task code calls the webserver)
    and said and counted here, by `notes`, as this process's own: one line when it starts failing, one when it works
    again, however many calls and tries in between. A forked process inherits `notes` as they stood when it was
    forked and writes each change it sees (failing, or working again) as a line on a pipe; take() reads them here.
    Noted in this process itself (a Spark try runs here), a change is applied at once."""

    def __init__(self, notes: FaultNotes, kind: str, failing: str, works: str) -> None:
        self.notes, self.kind, self._failing, self._works = notes, kind, failing, works
        self._pid = os.getpid()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # (a full pipe drops a note rather than holding task code)
        self._rest = b""

    def note(self, error: str | None) -> None:
        """A call failed with `error` (the fleet's fault), or worked (None)."""
        if os.getpid() == self._pid:
            self._apply(error)
            return
        if (error is None) == (self.kind not in self.notes.failing):
            return  # no change (this process's copy of the notes, as forked, then as it changed them)
        if error is None:
            self.notes.failing.pop(self.kind, None)
        else:
            self.notes.failing[self.kind] = error
        with contextlib.suppress(OSError):
            os.write(self._write, json.dumps({"error": error}).encode() + b"\n")

    def take(self) -> None:
        """What the forked processes noted since the last call, said and counted here."""
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                break
            self._rest += chunk
        *lines, self._rest = self._rest.split(b"\n")
        for line in lines:
            try:
                error = json.loads(line).get("error")
            except (ValueError, AttributeError):
                continue
            self._apply(error if isinstance(error, str) else None)

    def _apply(self, error: str | None) -> None:
        if error is None:
            self.notes.works(self.kind, self._works)
        else:
            self.notes.failed(self.kind, self._failing, error)


def no_say(_line: str) -> None:
    """(Where a line has nowhere to go.)"""


def counters_of(metrics: Any) -> FleetCounters | None:
    """The fleet counters of a job's metrics (None: it has none)."""
    found = getattr(metrics, "fleet", None)
    return found if isinstance(found, FleetCounters) else None
