"""Scheduler settings, with their defaults; each can be set as LEDGER_<NAME> in the environment. Each field's
metadata says what it does: docs/settings.md is generated from it (through ledger/infra/settings.py)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra.values import parse_bool

MAX_LOCAL_PARALLELISM = 512  # worker processes the local executor starts at most (one per slot)


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class SchedulerSettings:
    executor: str = field(default="local", metadata=_help(
        'The executor that runs tries: local, sequential or celery.'))
    parallelism: int = field(default=4, metadata=_help("Task tries running at once in this job's executor."))
    poll_interval: float = field(default=1.0, metadata=_help('Longest sleep between loops when nothing wakes the job.'))
    heartbeat_interval: float = field(default=2.0, metadata=_help("How often the job row's heartbeat is written."))
    lock_timeout: float = field(default=30.0, metadata=_help(
        'A holder silent for this long loses its run locks to others; its local tries are killed after two thirds '
        'of it without a heartbeat.'))
    max_held_runs: int = field(default=64, metadata=_help('Runs one job locks at most at a time.'))
    shutdown_grace: float = field(default=30.0, metadata=_help(
        'Seconds running tries get to finish on SIGTERM/SIGINT.'))
    parsing_processes: int = field(default=2, metadata=_help('DAG file processors.'))
    min_file_process_interval: float = field(default=30.0, metadata=_help(
        'An unchanged file is re-imported at most this often.'))
    dag_dir_list_interval: float = field(default=30.0, metadata=_help(
        'How often the DAGs folder is listed for new/deleted files.'))
    dag_file_processor_timeout: float = field(default=50.0, metadata=_help(
        'A file whose import takes longer is killed.'))
    scheduling_interval: float = field(default=1.0, metadata=_help('How often due intervals of every DAG are checked.'))
    task_state_signals: bool = field(default=True, metadata=_help(
        'Send `ledger.task.<dag>.<task>` signals when task instances change state.'))
    signal_wakeup: bool = field(default=True, metadata=_help(
        'Woken by signals (doorbell) and database changes (newest event id, every 50 ms); false: poll only, '
        'waking every poll_interval, as schedulers that poll the database do (for comparison).'))
    db_max_outage: float = field(default=600.0, metadata=_help(
        'A transient database error (locked SQLite file, PostgreSQL restart, deadlock...) is retried with '
        'backoff; a job whose database stays unusable this many seconds exits with the error.'))
    callback_timeout: float = field(default=60.0, metadata=_help(
        'A callback (or notifier) call still running after this long is killed.'))
    callback_parallelism: int = field(default=4, metadata=_help(
        'Callback calls one job makes at once, each in a process of its own.'))
    metrics_port: int = field(default=0, metadata=_help('Serve Prometheus metrics on this port (0: not served).'))
    metrics_host: str = field(default="127.0.0.1", metadata=_help('The address the metrics are served on.'))
    reuse_workers: bool = field(default=False, metadata=_help(
        'LocalExecutor: Python tries run in the (long-lived) worker process itself instead of a child forked '
        'per try: faster, no per-try isolation (docs/scheduler.md, "Reusing workers").'))
    queue_ahead: int = field(default=-1, metadata=_help(
        'LocalExecutor: work items each worker is sent beyond the try it runs, so that it starts its next try'
        ' the moment one ends instead of waiting for the loop (docs/scheduler.md, "Queueing ahead"); 0: only '
        'idle workers get work; -1 (auto): 1 with reuse_workers or in `ledger backfill`, 0 when the scheduler\'s '
        'tries fork.'))
    started_write_delay: float = field(default=0.25, metadata=_help(
        "A try's start is written with the next transaction the loop needs anyway, at most this many seconds "
        'later, instead of in a transaction of its own while every worker is busy (0: at once); see '
        'docs/scheduler.md.'))
    max_map_length: int = field(default=1024, metadata=_help(
        "The most instances a task mapped over another task's value gets (else: failed)."))
    max_lost_tries: int = field(default=3, metadata=_help(
        'A try lost to a crash (its job, worker or host died) spends no retry; after this many lost tries in '
        'a row the task instance fails, saying so.'))
    verify_memory: bool = field(
        default_factory=lambda: parse_bool("LEDGER_VERIFY_MEMORY", os.environ.get("LEDGER_VERIFY_MEMORY", "")),
        metadata=_help("At the end of every loop's transaction, compare what the job remembers of its held runs "
                       "with the database and stop on any difference (scheduler/loop/memory.py): on in the test "
                       "suite's scenarios; it costs a read per loop."))

    def items_ahead(self, *, batch: bool = False) -> int:
        """queue_ahead, with auto (-1) resolved: a worker that runs tries itself finishes one in well under a
        loop, so it is sent one more; so is a worker of a `batch` job (`ledger backfill`: what counts is when the
        whole backfill ends, not how soon a downstream task follows its upstream, decision 0341). The
        scheduler's forked tries get none: a downstream task would wait behind an item sent ahead for as long
        as that try runs (docs/benchmarks.md)."""
        if self.queue_ahead >= 0:
            return self.queue_ahead
        return 1 if self.reuse_workers or batch else 0

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
                values[f.name] = parse_bool(f"LEDGER_{f.name.upper()}", raw)
                continue
            try:
                values[f.name] = kind(raw)
            except ValueError:
                raise ConfigError(f"LEDGER_{f.name.upper()}={raw!r} is not a valid {kind.__name__}") from None
            if kind is float and not math.isfinite(values[f.name]):
                raise ConfigError(f"LEDGER_{f.name.upper()}={raw!r} is not a finite number of seconds")
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
        if self.lock_timeout < 6 * self.heartbeat_interval:  # (decision 0349)
            raise ConfigError(f"lock_timeout ({self.lock_timeout:g} s) must be at least six times heartbeat_interval "
                              f"({self.heartbeat_interval:g} s): a job's local tries are killed once it has written "
                              f"no heartbeat for two thirds of lock_timeout")
