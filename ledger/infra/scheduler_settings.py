"""Scheduler settings, with their defaults; each can be set as LEDGER_<NAME> in the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ledger.core.errors import ConfigError

MAX_LOCAL_PARALLELISM = 512  # worker processes the local executor starts at most (one per slot)


@dataclass(frozen=True)
class SchedulerSettings:
    executor: str = "local"  # local | sequential | celery
    parallelism: int = 4  # task tries running at once in this job's executor
    poll_interval: float = 1.0  # longest sleep between loops when nothing wakes the job
    heartbeat_interval: float = 2.0  # how often the job row's heartbeat is written
    lock_timeout: float = 30.0  # a holder silent for this long loses its run locks to others
    max_held_runs: int = 64  # runs one job locks at most at a time
    shutdown_grace: float = 30.0  # seconds running tries get to finish on SIGTERM/SIGINT
    parsing_processes: int = 2  # DAG file processors
    min_file_process_interval: float = 30.0  # an unchanged file is re-imported at most this often
    dag_dir_list_interval: float = 30.0  # how often the DAGs folder is listed for new/deleted files
    dag_file_processor_timeout: float = 50.0  # a file whose import takes longer is killed
    scheduling_interval: float = 1.0  # how often due intervals of every DAG are checked
    task_state_signals: bool = True  # send `ledger.task.<dag>.<task>` signals when task instances change state
    # woken by signals (doorbell) and database changes (newest event id, every 50 ms); false: poll only,
    # waking every poll_interval, as schedulers that poll the database do (for comparison)
    signal_wakeup: bool = True
    # a transient database error (locked SQLite file, PostgreSQL restart, deadlock...) is retried with
    # backoff; a job whose database stays unusable this many seconds exits with the error
    db_max_outage: float = 600.0
    callback_timeout: float = 60.0  # a callback (or notifier) call still running after this long is killed
    callback_parallelism: int = 4  # callback calls one job makes at once, each in a process of its own
    metrics_port: int = 0  # serve Prometheus metrics on this port (0: not served)
    metrics_host: str = "127.0.0.1"  # the address the metrics are served on
    # LocalExecutor: Python tries run in the (long-lived) worker process itself instead of a child forked per
    # try: faster, no per-try isolation (docs/scheduler.md, "Reusing workers")
    reuse_workers: bool = False
    # LocalExecutor: work items each worker is sent beyond the try it runs, so that it starts its next try the
    # moment one ends instead of waiting for the loop (docs/scheduler.md, "Queueing ahead"); 0: only idle
    # workers get work; -1 (auto): 1 with reuse_workers, 0 when each try forks
    queue_ahead: int = -1
    # a try's start is written with the next transaction the loop needs anyway, at most this many seconds later,
    # instead of in a transaction of its own while every worker is busy (0: at once); see docs/scheduler.md
    started_write_delay: float = 0.25
    max_map_length: int = 1024  # the most instances a task mapped over another task's value gets (else: failed)
    # a try lost to a crash (its job, worker or host died) spends no retry; after this many lost tries in a row
    # the task instance fails, saying so
    max_lost_tries: int = 3
    # at the end of every loop's transaction, compare what the job remembers of its held runs with the database
    # and stop on any difference (scheduler/loop/memory.py): on in the test suite's scenarios; it costs a read per loop
    # (its default follows LEDGER_VERIFY_MEMORY even for settings made without from_env: the test suite sets it)
    verify_memory: bool = field(default_factory=lambda: os.environ.get("LEDGER_VERIFY_MEMORY", "") in ("1", "true"))

    def items_ahead(self) -> int:
        """queue_ahead, with auto (-1) resolved: a worker that runs tries itself finishes one in well under a
        loop, so it is sent one more; a try that forks takes longer than a loop, and an item sent ahead
        would only wait behind it (measured in docs/benchmarks.md)."""
        if self.queue_ahead >= 0:
            return self.queue_ahead
        return 1 if self.reuse_workers else 0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> SchedulerSettings:
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        defaults = cls()
        for f in fields(cls):
            raw = env.get(f"LEDGER_{f.name.upper()}")
            if raw is None:
                continue
            kind = type(getattr(defaults, f.name))
            if kind is bool:
                if raw.strip().lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ConfigError(f"LEDGER_{f.name.upper()}={raw!r} is not a valid bool (true or false)")
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
                continue
            try:
                values[f.name] = kind(raw)
            except ValueError:
                raise ConfigError(f"LEDGER_{f.name.upper()}={raw!r} is not a valid {kind.__name__}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})  # a given option wins
        settings = replace(cls(), **values)
        settings.check()
        return settings

    def check(self) -> None:
        if self.executor not in ("local", "sequential", "celery"):
            raise ConfigError(f"unknown executor {self.executor!r}; use local, sequential or celery")
        for name in ("parallelism", "max_held_runs", "parsing_processes", "callback_parallelism", "max_map_length",
                     "max_lost_tries"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.executor == "local" and self.parallelism > MAX_LOCAL_PARALLELISM:
            raise ConfigError(f"parallelism {self.parallelism} is more than the local executor runs: it starts a "
                              f"worker process per slot, at most {MAX_LOCAL_PARALLELISM} on one host")
        if self.queue_ahead < -1:
            raise ConfigError(f"queue_ahead must be 0 or more (-1: auto), not {self.queue_ahead}")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics port must be between 1 and 65535 (0: off), not {self.metrics_port}")
        if not 0 <= self.started_write_delay < self.heartbeat_interval:  # (nan is refused too)
            raise ConfigError(f"started_write_delay must be 0 or more and less than heartbeat_interval "
                              f"({self.heartbeat_interval:g} s)")
        for name in ("poll_interval", "heartbeat_interval", "lock_timeout", "dag_file_processor_timeout",
                     "db_max_outage", "callback_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
