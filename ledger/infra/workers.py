"""The Celery workers as the ledger shows them (`ledger workers`, the web view, /api/v1/workers): each worker's
heartbeat entry in the result backend's Redis, which it writes every third of its heartbeat timeout and which
expires when it stops beating. Key names are shared with scheduler/executors/celery_app.py (which imports them from
here:
nothing in ledger/ imports the scheduler)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ledger.core.errors import ConfigError

BROKER_VARIABLE = "LEDGER_CELERY_BROKER_URL"
BACKEND_VARIABLE = "LEDGER_CELERY_RESULT_BACKEND"
WORKERS = "ledger:workers"  # the set of worker names that ever beat (each one's entry expires on its own)
API_VARIABLE = "LEDGER_API_URL"  # a worker's: the URL of ledger's webserver (code, variables, connections)
TOKEN_VARIABLE = "LEDGER_WORKER_TOKEN"  # the workers' credential for /api/v1/worker/ (the webserver's too)
NAME_VARIABLE = "LEDGER_WORKER_NAME"  # set by `ledger worker` for its pool processes (and so for its tries)


def worker_key(name: str) -> str:
    return f"ledger:worker:{name}"


def task_id(ti_id: int, try_number: int) -> str:
    """The Celery task id of a try: the same in every process, so a job that takes a run over finds its tries, and
    a reader finds a running try's log."""
    return f"ledger-{ti_id}-{try_number}"


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
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        names = sorted(n.decode() if isinstance(n, bytes) else str(n) for n in client.smembers(WORKERS))
        raws = client.mget([worker_key(n) for n in names]) if names else []
        gone = [n for n, raw in zip(names, raws, strict=True) if raw is None]
        if gone:
            client.srem(WORKERS, *gone)
    except redis.RedisError as exc:
        raise ConfigError(f"cannot read the workers from {redacted(url)}: {exc}") from None
    finally:
        client.close()
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


def redacted(url: str) -> str:
    """A URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}{sep}{user + ':***' if ':' in creds else user}@{host}"
