"""What the CeleryExecutor (the scheduler's side) and `ledger worker` (the workers' side) share: the Celery
application, the names of the keys they exchange in the result backend's Redis, and a work item as JSON.

Where things are:

* the broker (LEDGER_CELERY_BROKER_URL: Redis, or RabbitMQ through an amqp:// URL) carries one message per try,
  on the task's queue, with a Celery task id that names the try: `ledger-<ti id>-<try number>`;
* the result backend (LEDGER_CELERY_RESULT_BACKEND, by default the broker's URL; it must be Redis) holds what a
  worker says about a try: STARTED with the host and pid, then the try's outcome as the Celery task's result
  (its state, reason, and the values, rendered templates and writes it left). Beside Celery's own keys:
  `ledger:claim:<task id>` (the first delivery that started the try: a redelivery finds it and is refused),
  `ledger:queued:<task id>` (the message was sent: a job that takes the run over adopts the try),
  `ledger:log:<task id>` (the try's log as it is written, each part at its byte offset), `ledger:lease:<task id>`
  (the running try's lease, which its worker renews: scheduler/runtime/try_lease.py), `ledger:worker:<name>`
  (each worker's heartbeat, which also holds its name, expiring after the heartbeat timeout), with
  `ledger:worker:<name>:running` (the tries it started and has not seen end) and
  `ledger:worker:<name>:incarnations` (its incarnations' last heartbeats, for `ledger workers`; the names in
  `ledger:worker-names`), and `ledger:refused` (refused redeliveries, for the events).

Nothing here imports the database layer: a worker has no database.
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra.workers import BROKER_VARIABLE, backend_url
from ledger.infra.workers import (
    log_key as log_key,  # (key names readers of logs share: defined in ledger/infra/workers.py)
)
from ledger.infra.workers import task_id as task_id
from ledger.scheduler.executors.base import WorkItem

TASK_NAME = "ledger.run_try"
HEARTBEAT_TIMEOUT_VARIABLE = "LEDGER_WORKER_HEARTBEAT_TIMEOUT"
DEFAULT_HEARTBEAT_TIMEOUT = 30.0  # seconds without a heartbeat after which a worker's tries are lost
QUEUED_TIMEOUT_VARIABLE = "LEDGER_CELERY_QUEUED_TIMEOUT"
DEFAULT_QUEUED_TIMEOUT = 600.0  # seconds a sent try may wait unclaimed before its message is sent again (Airflow's)
SEND_TIMEOUT = 5.0  # seconds a send may wait on the broker (connecting, writing, reading its answer)
# kombu's Redis transport (socket_*) and py-amqp's (the others); each ignores the other's. max_retries 0: a broker
# that cannot be reached fails the send at once instead of kombu's connection retries holding it (the executor's
# sender thread is what tries again)
_SEND_TIMEOUTS = {"socket_timeout": SEND_TIMEOUT, "socket_connect_timeout": SEND_TIMEOUT,
                  "connect_timeout": SEND_TIMEOUT, "read_timeout": SEND_TIMEOUT, "write_timeout": SEND_TIMEOUT,
                  "max_retries": 0}
KEEP = 7 * 24 * 3600  # seconds the keys of a try are kept in Redis
REFUSED = "ledger:refused"


def task_id_pattern() -> str:
    """A Redis glob pattern matching every try's task id (task_id())."""
    return "ledger-*"


def claim_key(tid: str) -> str:
    return f"ledger:claim:{tid}"


def queued_key(tid: str) -> str:
    return f"ledger:queued:{tid}"


@dataclasses.dataclass(frozen=True)
class CeleryConfig:
    broker_url: str
    backend_url: str
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    queued_timeout: float = DEFAULT_QUEUED_TIMEOUT

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> CeleryConfig:
        env = dict(os.environ) if env is None else env
        broker = (env.get(BROKER_VARIABLE) or "").strip()
        if not broker:
            raise ConfigError(f"the celery executor needs {BROKER_VARIABLE} (e.g. redis://127.0.0.1:6379/0)")
        backend = backend_url(env)
        assert backend is not None
        return cls(broker, backend, seconds_from_env(env, HEARTBEAT_TIMEOUT_VARIABLE, DEFAULT_HEARTBEAT_TIMEOUT),
                   seconds_from_env(env, QUEUED_TIMEOUT_VARIABLE, DEFAULT_QUEUED_TIMEOUT))


def seconds_from_env(env: dict[str, str], name: str, default: float) -> float:
    """A positive number of seconds from the environment (one line naming the variable when it is not)."""
    raw = env.get(name) or str(default)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def make_app(config: CeleryConfig, *, sending: bool = False) -> Any:
    """The Celery application both sides use (JSON messages only; a message is acknowledged when its try starts,
    so a try whose worker dies is never run again from its message: it is recorded lost and gets a new try).
    `sending`: the scheduler's, whose job thread sends messages itself: a broker that stops answering without
    closing the connection fails a send within SEND_TIMEOUT instead of holding it (and the job's loop) for ever."""
    from celery import Celery

    app = Celery("ledger", broker=config.broker_url, backend=config.backend_url)
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        task_default_queue="default", task_acks_late=False, worker_prefetch_multiplier=1,
        # a worker takes a message only when one of its processes is free (Redis brokers): none waits reserved in
        # a worker that a restart of Redis, or of the worker, would leave it stranded in until the visibility
        # timeout brought it back
        worker_disable_prefetch=True,
        task_track_started=False,  # the try says it started itself, with its host and pid
        result_expires=KEEP, broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        worker_send_task_events=False, task_send_sent_event=False, worker_enable_remote_control=True,
        broker_transport_options={"visibility_timeout": 300,  # a reserved, unstarted message comes back after
                                  **(_SEND_TIMEOUTS if sending else {})},
        result_backend_transport_options={"retry_policy": {"timeout": 5.0}},
    )
    return app


def redis_client(url: str) -> Any:
    """A Redis client on the result backend (the keys listed above)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0, health_check_interval=10)


_DATES = ("logical_date", "data_interval_start", "data_interval_end")
_TUPLES = ("prev_interval", "prev_success")
_FIELDS = tuple(f.name for f in dataclasses.fields(WorkItem))


def item_to_json(item: WorkItem) -> dict[str, Any]:
    """A work item as a JSON-able message (the paths in it are the scheduler host's; a worker finds its own)."""
    data = {name: getattr(item, name) for name in _FIELDS}  # (not asdict(): it deep-copies every value)
    for name in _DATES:
        data[name] = getattr(item, name).isoformat()
    for name in _TUPLES:
        data[name] = list(getattr(item, name)) if getattr(item, name) is not None else None
    return data


def item_from_json(data: dict[str, Any], **changes: Any) -> WorkItem:
    """The work item of a message, with `changes` (the worker's own paths)."""
    values = {k: v for k, v in data.items() if k in _FIELDS}
    for name in _DATES:
        values[name] = datetime.fromisoformat(values[name])
    for name in _TUPLES:
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    values.update(changes)
    return WorkItem(**values)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)
