"""Prometheus metrics of a scheduler: `ledger scheduler --metrics-port N` (or LEDGER_METRICS_PORT) serves them
on 127.0.0.1:N/metrics (LEDGER_METRICS_HOST for another address).

Each job has its own registry, so tests and several jobs in one process never share counters. Updating a
metric costs well under a microsecond; without a port nothing is served.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ledger.scheduler.executors.fleet_faults import FleetCounters

LOOP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.finished = Counter("ledger_task_instances_finished", "Tries that ended, by the state recorded",
                                ["state"], registry=r)
        self.started = Counter("ledger_tries_started", "Tries that started running", registry=r)
        self.queued = Gauge("ledger_queue_depth", "Tries handed to the executor that have not started", registry=r)
        self.running = Gauge("ledger_running_tries", "Tries running in this job's executor", registry=r)
        self.loop = Histogram("ledger_loop_duration_seconds", "Time of one scheduler loop", buckets=LOOP_BUCKETS,
                              registry=r)
        self.lag = Histogram("ledger_task_lag_seconds", "From a try being queued to it running",
                             buckets=LAG_BUCKETS, registry=r)
        self.runs_created = Counter("ledger_runs_created", "Runs this job created, by run type", ["run_type"],
                                    registry=r)
        self.signals = Counter("ledger_signals_handled", "Actions taken on signals (START, STOP, ...)", registry=r)
        self.parse = Gauge("ledger_dag_file_parse_seconds", "Time of the latest import of a DAG file", ["file"],
                           registry=r)
        self.import_errors = Gauge("ledger_dag_file_import_errors", "1 when a DAG file failed to import",
                                   ["file"], registry=r)
        self.callbacks = Counter("ledger_callbacks", "Callback calls that ended, by outcome", ["outcome"],
                                 registry=r)
        # the CeleryExecutor's tries, by the queue their task names
        self.queue_queued = Gauge("ledger_queue_queued_tries", "Tries sent to a queue that no worker started yet",
                                  ["queue"], registry=r)
        self.queue_running = Gauge("ledger_queue_running_tries", "Tries of a queue running on workers", ["queue"],
                                   registry=r)
        self.queue_lost = Counter("ledger_queue_lost_tries", "Tries of a queue lost with their worker", ["queue"],
                                  registry=r)
        # the CeleryExecutor's faults talking to the broker and Redis (scheduler/executors/fleet_faults.py)
        self.fleet = FleetCounters(r)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server

    def parsed(self, results: Iterable[Any]) -> None:
        for res in results:
            if getattr(res, "deleted", False):
                for gauge in (self.parse, self.import_errors):
                    with contextlib.suppress(KeyError):
                        gauge.remove(res.fileloc)
                continue
            self.parse.labels(res.fileloc).set(res.duration)
            self.import_errors.labels(res.fileloc).set(1 if res.error else 0)
