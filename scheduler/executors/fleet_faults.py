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
  outcome (a try's outcome to Redis).
"""

from __future__ import annotations

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


def no_say(_line: str) -> None:
    """(Where a line has nowhere to go.)"""


def counters_of(metrics: Any) -> FleetCounters | None:
    """The fleet counters of a job's metrics (None: it has none)."""
    found = getattr(metrics, "fleet", None)
    return found if isinstance(found, FleetCounters) else None
