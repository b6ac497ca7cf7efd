"""The Celery workers as the ledger shows them (`ledger workers`, the web view, /api/v1/workers): each worker's
heartbeat entry in the result backend's Redis, which it writes every third of its heartbeat timeout and which
expires when it stops beating. Key names are shared with scheduler/executors/celery_app.py (which imports them from
here:
nothing in ledger/ imports the scheduler)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ledger.core.errors import ConfigError

BROKER_VARIABLE = "LEDGER_CELERY_BROKER_URL"
BACKEND_VARIABLE = "LEDGER_CELERY_RESULT_BACKEND"
WORKERS = "ledger:workers"  # the set of worker names that ever beat (each one's entry expires on its own)
WORKER_NAMES = "ledger:worker-names"  # the names whose incarnations are on record (`ledger workers` shows them)
INCARNATIONS_KEPT = 10  # a name's incarnations on record, newest first (a worker that claims the name trims them)
API_VARIABLE = "LEDGER_API_URL"  # a worker's: the URL of ledger's webserver (code, variables, connections)
TOKEN_VARIABLE = "LEDGER_WORKER_TOKEN"  # the workers' credential for /api/v1/worker/ (the webserver's too)
NAME_VARIABLE = "LEDGER_WORKER_NAME"  # set by `ledger worker` for its pool processes (and so for its tries)


def worker_key(name: str) -> str:
    return f"ledger:worker:{name}"


def incarnations_key(name: str) -> str:
    """A hash: each incarnation of the worker of this name (one process's run) -> its last heartbeat entry."""
    return f"ledger:worker:{name}:incarnations"


def running_key(name: str) -> str:
    """A set: the task ids of the tries the worker of this name started and has not seen end."""
    return f"ledger:worker:{name}:running"


def lease_key(tid: str) -> str:
    """A running remote try's lease (scheduler/runtime/try_lease.py, decision 0200)."""
    return f"ledger:lease:{tid}"


def task_id(ti_id: int, try_number: int, database: str) -> str:
    """The Celery task id of a try: the same in every process, so a job that takes a run over finds its tries, and
    a reader finds a running try's log. `database`: the identity of the database the try is recorded in
    (DatabaseIdentity.of), so that a database made again against the same Redis, whose ids start at 1 again, never
    takes another's keys (its claims, states, leases, logs) for its own tries (decision 0344); '' for a task
    instance made before databases had an identity."""
    return f"ledger-{database}-{ti_id}-{try_number}" if database else f"ledger-{ti_id}-{try_number}"


@dataclass(frozen=True)
class DatabaseIdentity:
    """A database's identity (its `database_identity` row: made once, by the migration that made the table) and
    the newest task instance made before it (0 for a database made with it): those keep the task ids they had, so
    that a job adopting their tries after the upgrade finds them under the same keys."""

    identity: str
    legacy_through: int = 0

    def of(self, ti_id: int) -> str:
        """What task_id() is given for a try of task instance `ti_id`."""
        return "" if ti_id <= self.legacy_through else self.identity


def log_key(tid: str) -> str:
    """Where a running remote try's log is, in the result backend: each part written at its byte offset."""
    return f"ledger:log:{tid}"


def backend_url(env: dict[str, str] | None = None) -> str | None:
    """The Redis URL the workers beat in (LEDGER_CELERY_RESULT_BACKEND, else the broker's URL); None: no Celery
    executor is configured here."""
    env = dict(os.environ) if env is None else env
    url = (env.get(BACKEND_VARIABLE) or "").strip() or (env.get(BROKER_VARIABLE) or "").strip()
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://")):
        raise ConfigError(f"{BACKEND_VARIABLE} must be a redis:// URL (the broker's URL is used when it is not set, "
                          f"and {url.split('://')[0]}:// is not Redis)")
    return url


def listing(url: str, *, now: float | None = None) -> list[dict[str, Any]]:
    """The live workers, by name: name, host, queues, concurrency, running tries, last heartbeat (epoch seconds)
    and how long ago it was. Names whose entry expired are dropped from the set."""
    with _reading(url) as client:
        names = sorted(n.decode() if isinstance(n, bytes) else str(n) for n in client.smembers(WORKERS))
        raws = client.mget([worker_key(n) for n in names]) if names else []
        gone = [n for n, raw in zip(names, raws, strict=True) if raw is None]
        if gone:
            client.srem(WORKERS, *gone)
    now = time.time() if now is None else now
    out = []
    for raw in raws:
        if raw is None:
            continue
        entry = json.loads(raw)
        out.append({"name": entry["name"], "host": entry.get("host"), "queues": entry.get("queues", []),
                    "concurrency": entry.get("concurrency"), "running": len(entry.get("running", [])),
                    "running_tries": entry.get("running", []), "pid": entry.get("pid"),
                    "last_heartbeat": entry.get("heartbeat"),
                    "seconds_since_heartbeat": round(max(0.0, now - float(entry.get("heartbeat") or now)), 3)})
    return out


@contextlib.contextmanager
def _reading(url: str) -> Iterator[Any]:
    """A Redis client for `url`, closed after; a Redis error is one line (ConfigError)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        yield client
    except redis.RedisError as exc:
        raise ConfigError(f"cannot read the workers from {redacted(url)}: {exc}") from None
    finally:
        client.close()


def fleet(url: str, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every worker name with incarnations on record (`ledger workers`): whether one is live, its incarnations
    (newest first: host, pid, started, last heartbeat, current or gone) and the leases of the tries it started and
    has not seen end (task instance, try, holder, seconds left; or how it ended: expired, dead, taken). Names whose
    record expired are dropped from the set."""
    with _reading(url) as client:
        names = sorted(n.decode() if isinstance(n, bytes) else str(n)
                       for n in client.smembers(WORKER_NAMES) | client.smembers(WORKERS))
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.get(worker_key(name))
            pipe.hgetall(incarnations_key(name))
            pipe.smembers(running_key(name))
        found = pipe.execute()
        records = [(name, *found[3 * i:3 * i + 3]) for i, name in enumerate(names)]
        tids = sorted({tid.decode() for *_, running in records for tid in running})
        pipe = client.pipeline(transaction=False)
        for tid in tids:
            pipe.get(lease_key(tid))
            pipe.pttl(lease_key(tid))
        answers = pipe.execute()
        gone = [name for name, entry, kept, _running in records if entry is None and not kept]
        if gone:
            client.srem(WORKER_NAMES, *gone)
    now = time.time() if now is None else now
    leases = {tid: _lease(tid, answers[2 * i], answers[2 * i + 1]) for i, tid in enumerate(tids)}
    out = []
    for name, entry, kept, running in records:
        if entry is None and not kept:
            continue
        live = json.loads(entry) if entry is not None else None
        lives = sorted((json.loads(v) for v in kept.values()), key=lambda e: float(e.get("started") or 0),
                       reverse=True)
        out.append({
            "name": name, "live": live is not None,
            "incarnations": [{
                "incarnation": e.get("incarnation"), "host": e.get("host"), "pid": e.get("pid"),
                "started": e.get("started"), "last_heartbeat": e.get("heartbeat"),
                "seconds_since_heartbeat": round(max(0.0, now - float(e.get("heartbeat") or now)), 3),
                "state": "current" if live is not None and e.get("incarnation") == live.get("incarnation") else "gone",
            } for e in lives],
            "leases": [leases[tid.decode()] for tid in sorted(running)]})
    return out


def _lease(tid: str, raw: bytes | None, pttl: int) -> dict[str, Any]:
    """A try's lease as `ledger workers` shows it: held (by whom, seconds left) or ended (expired, dead, taken)."""
    _, ti, number = tid.rsplit("-", 2)
    out: dict[str, Any] = {"task_id": tid, "ti_id": int(ti), "try_number": int(number), "holder": None,
                           "expires_in": None, "ended": None}
    value = json.loads(raw) if raw is not None else None
    if value is None:
        out["ended"] = "expired"
    elif "by" in value:
        out["holder"] = f"{value['by']} (pool process {value.get('pool')})"
        out["expires_in"] = round(pttl / 1000, 3) if pttl >= 0 else None
    else:
        out["ended"] = f"dead: {value['dead']}" if "dead" in value else f"taken: {value.get('taken')}"
    return out


def redacted(url: str) -> str:
    """A URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}{sep}{user + ':***' if ':' in creds else user}@{host}"
