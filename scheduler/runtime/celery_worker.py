"""`ledger worker`: a Celery worker that runs tries of any DAG from its pinned code, with no DAGs folder and no
database.

A try's message names its DAG and version hash. The worker materialises that version's code into its own
`$LEDGER_HOME/code` from ledger's API (`GET /api/v1/worker/code/DAG/VERSION`, with LEDGER_WORKER_TOKEN), once per
version and host (atomically, as scheduler/loop/code_cache.py does for the scheduler), and runs the try from it as a
LocalExecutor worker does: a forked child in its own process group, with the execution timeout (Spark tries in
the pool process itself). What the try produces goes back through the result backend
(scheduler/executors/celery_app.py):
its start (host, pid), its log as it is written, and its outcome with the values, rendered templates and writes
it left. The job that holds the run records all of it; the worker writes nothing else anywhere.

A try runs once: the first delivery claims it (`SET NX`); a redelivered message whose try was claimed is refused,
and the refusal is recorded (the job that follows the try writes it as an event).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra.code import sha256_bytes
from ledger.infra.logs import log_file
from ledger.infra.workers import API_VARIABLE, NAME_VARIABLE, TOKEN_VARIABLE, WORKERS, worker_key
from scheduler.executors.base import WorkItem
from scheduler.executors.celery_app import (
    KEEP,
    REFUSED,
    TASK_NAME,
    CeleryConfig,
    claim_key,
    dumps,
    item_from_json,
    log_key,
    make_app,
    redis_client,
)
from scheduler.loop.code_cache import materialise
from scheduler.runtime import try_files, try_plan, try_process
from scheduler.runtime.try_outcome import Outcome, describe_exception, one_line

INCARNATION_VARIABLE = "LEDGER_WORKER_INCARNATION"
LOG_SHIP_INTERVAL = 0.5  # seconds between two chunks of a running try's log sent to the result backend
LOG_CHUNK = 256 * 1024


@dataclass(frozen=True)
class WorkerSettings:
    name: str  # this worker's host name, as tries record it
    queues: tuple[str, ...]
    concurrency: int
    home: Path
    api_url: str
    token: str | None
    celery: CeleryConfig


class CodeFetchError(Exception):
    pass


def fetch_code(settings: WorkerSettings, dag_id: str, version: str) -> tuple[str, str, bool]:
    """(snapshot root, DAG file, captured) of a version on this host, fetched from ledger's API the first time
    (kept in `$LEDGER_HOME/code`; an index file per version says which snapshot it is)."""
    base = settings.home / "code"
    index = base / "versions" / dag_id / f"{version}.json"
    try:
        known = json.loads(index.read_text(encoding="utf-8"))
        root = base / "snapshots" / known["key"]
        if root.is_dir():
            return str(root), str(root / known["entry"]), bool(known["captured"])
    except (OSError, ValueError, KeyError):
        pass
    url = (f"{settings.api_url.rstrip('/')}/api/v1/worker/code/{urllib.parse.quote(dag_id, safe='')}/"
           f"{urllib.parse.quote(version, safe='')}")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {settings.token}"}
                                     if settings.token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            data = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise CodeFetchError(f"cannot fetch the code of {dag_id} version {version[:12]} from {settings.api_url}: "
                             f"HTTP {exc.code} {one_line(exc.read().decode('utf-8', 'replace'), 200)}") from None
    except (OSError, ValueError) as exc:
        raise CodeFetchError(f"cannot fetch the code of {dag_id} version {version[:12]} from {settings.api_url}: "
                             f"{exc}") from None
    from ledger.store.code import Snapshot

    files = {path: base64.b64decode(text) for path, text in data["files"].items()}
    for path, content in files.items():
        if data.get("sha256", {}).get(path) not in (None, sha256_bytes(content)):
            raise CodeFetchError(f"the code of {dag_id} version {version[:12]}: {path} does not match its hash")
    snap = Snapshot(data["key"], data["entry"], files, bool(data["captured"]))
    root = materialise(base, snap)
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(f".{index.name}.{os.getpid()}.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps({"key": snap.key, "entry": snap.entry, "captured": snap.captured}), encoding="utf-8")
    os.replace(tmp, index)
    return str(root), str(root / snap.entry), snap.captured


class _LogShipper:
    """Writes what a try's log gained since the last call into `ledger:log:<task id>` at its own offset (SETRANGE:
    writing a chunk twice, as a client that retries after a lost reply does, changes nothing)."""

    def __init__(self, client: Any, tid: str, path: str) -> None:
        self.client, self.key, self.path, self.offset = client, log_key(tid), path, 0
        self.shipped = hashlib.sha256()  # of the bytes sent so far: finish() sees whether the log was rewritten

    def ship(self) -> None:
        """(Redis unreachable for a moment: what was not sent is sent by a later call.)"""
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                while chunk := log.read(LOG_CHUNK):
                    pipe = self.client.pipeline(transaction=False)
                    pipe.setrange(self.key, self.offset, chunk)
                    pipe.expire(self.key, KEEP)
                    pipe.execute()
                    self.offset += len(chunk)
                    self.shipped.update(chunk)
        except Exception:  # an OSError reading the log; a redis error (it restarts): sent again later
            return

    def finish(self) -> bool:
        """Once the try has ended: the rest of its log; or, when the try rewrote what was sent already (the secrets it
        read are masked as it ends), the whole log in place of what was sent. True: it was sent whole again."""
        try:
            with open(self.path, "rb") as log:
                head = log.read(self.offset)
                if hashlib.sha256(head).digest() == self.shipped.digest():
                    self.ship()
                    return False
                whole = head + log.read()
            self.client.set(self.key, whole, ex=KEEP)
            self.offset, self.shipped = len(whole), hashlib.sha256(whole)
            return True
        except Exception:  # (as in ship: what reached Redis stands)
            return False


def _settings_of_pool() -> WorkerSettings:
    global _pool_settings
    if _pool_settings is None:
        _pool_settings = settings_from_env()
    return _pool_settings


_pool_settings: WorkerSettings | None = None
_client: Any = None


def _redis() -> Any:
    global _client
    if _client is None:
        _client = redis_client(_settings_of_pool().celery.backend_url)
    return _client


def run_message(task: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """The Celery task: run the try a message describes, once. Returns its outcome (the Celery result)."""
    from celery.exceptions import Ignore

    settings = _settings_of_pool()
    client = _redis()
    tid = task.request.id
    incarnation = os.environ.get(INCARNATION_VARIABLE, "")
    mine = f"{settings.name} {uuid.uuid4().hex}"
    if not client.set(claim_key(tid), mine, nx=True, ex=KEEP):
        holder = (client.get(claim_key(tid)) or b"").decode()
        if holder != mine:  # (the same value: a retry of this SET, whose first reply was lost)
            client.rpush(REFUSED, dumps({"ti_id": payload["ti_id"], "try_number": payload["try_number"],
                                         "host": settings.name, "at": time.time(),
                                         "claimed_by": holder.split(" ")[0] or None}))
            raise Ignore()  # Celery leaves the try's result as the first delivery writes it
    running_key = f"{worker_key(settings.name)}:running"
    client.sadd(running_key, tid)
    path = log_file(str(settings.home / "logs"), payload["dag_id"], payload["run_id"], payload["task_id"],
                    payload["try_number"], payload.get("map_index", -1))
    try:
        try:
            root, fileloc, captured = fetch_code(settings, payload["dag_id"], payload["dag_version"])
            item = item_from_json(payload, fileloc=fileloc, code_root=root, code_captured=captured, log_path=path)
        except (CodeFetchError, OSError, ValueError) as exc:
            item = item_from_json(payload, log_path=path)
            reason = one_line(str(exc) if isinstance(exc, CodeFetchError) else describe_exception(exc))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"[ledger] worker {settings.name}: {reason}\n")
            task.update_state(state="STARTED", meta=_started(settings, incarnation, os.getpid()))
            return _result(settings, item, Outcome("failed", reason, time.time()), os.getpid(),
                           _LogShipper(client, tid, path))
        shipper = _LogShipper(client, tid, path)
        plan = try_plan.prepare(item)
        if try_plan.runs_in_process(plan):  # a Spark try: this pool process's session
            from scheduler.runtime import in_process

            task.update_state(state="STARTED", meta=_started(settings, incarnation, os.getpid()))
            done = in_process.run_in_process(item, plan).outcome
            try_plan.forget_prepared()
            return _result(settings, item, done, os.getpid(), shipper)
        running = try_process.fork_try(item)
        try_plan.forget_prepared()
        task.update_state(state="STARTED", meta=_started(settings, incarnation, running.pid))
        try:
            while (outcome := running.wait(LOG_SHIP_INTERVAL)) is None:
                shipper.ship()
        except BaseException:  # this pool process is being stopped (a revoke, a warm shutdown's end): the try too
            running.kill()
            raise
        return _result(settings, item, outcome, running.pid, shipper)
    finally:
        with contextlib.suppress(Exception):
            client.srem(running_key, tid)


def run_and_store(task: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """run_message(), its outcome stored as the try's SUCCESS state here: the scheduler sends its messages with
    ignore_result (it keeps no result subscription per try), so Celery itself stores only a raised error or a
    revocation (store_errors_even_if_ignored). A refused redelivery (Ignore) stores nothing."""
    outcome = run_message(task, payload)
    task.update_state(state="SUCCESS", meta=outcome)
    return outcome


def _started(settings: WorkerSettings, incarnation: str, pid: int) -> dict[str, Any]:
    return {"host": settings.name, "pid": pid, "at": time.time(), "incarnation": incarnation}


def _result(settings: WorkerSettings, item: WorkItem, outcome: Outcome, pid: int,
            shipper: _LogShipper) -> dict[str, Any]:
    """The outcome of a try, with what it left beside its log (then removed from this host) and its whole log
    sent on."""
    rewritten = shipper.finish()
    left = try_files.read(item.log_path)
    try_files.remove(item.log_path)
    return {"state": outcome.state, "reason": outcome.reason, "at": outcome.at, "pid": pid, "host": settings.name,
            "pushed": [[key, value] for key, value in left.pushed], "rendered": left.rendered, "writes": left.writes,
            "outlets": left.outlets,
            "log_bytes": shipper.offset, "log_rewritten": rewritten}


def settings_from_env(env: dict[str, str] | None = None, *, name: str | None = None,
                      queues: tuple[str, ...] = ("default",), concurrency: int | None = None) -> WorkerSettings:
    env = dict(os.environ) if env is None else env
    api = (env.get(API_VARIABLE) or "").strip()
    if not api.startswith(("http://", "https://")):
        raise ConfigError(f"a worker needs {API_VARIABLE}: the URL of ledger's webserver, where it fetches the "
                          f"code of the versions it runs (e.g. http://scheduler-host:8793)")
    home = Path(env.get("LEDGER_HOME") or Path.home() / ".ledger").expanduser().resolve()
    return WorkerSettings(
        name=name or env.get(NAME_VARIABLE) or socket.gethostname(), queues=queues,
        concurrency=concurrency or os.cpu_count() or 1, home=home, api_url=api,
        token=(env.get(TOKEN_VARIABLE) or "").strip() or None, celery=CeleryConfig.from_env(env))


def _beat(settings: WorkerSettings, incarnation: str, stop: threading.Event) -> None:
    """Every third of the heartbeat timeout: this worker's entry (host, queues, concurrency, running tries),
    which expires when it stops beating."""
    client = redis_client(settings.celery.backend_url)
    every = settings.celery.heartbeat_timeout / 3
    key = worker_key(settings.name)
    started = time.time()
    while not stop.is_set():
        with contextlib.suppress(Exception):  # (the broker's Redis restarting: beat again when it is back)
            running = sorted(member.decode() for member in client.smembers(f"{key}:running"))
            entry = {"name": settings.name, "host": socket.gethostname(), "pid": os.getpid(),
                     "queues": list(settings.queues), "concurrency": settings.concurrency, "running": running,
                     "heartbeat": time.time(), "started": started, "incarnation": incarnation}
            pipe = client.pipeline()
            pipe.set(key, dumps(entry), px=int(settings.celery.heartbeat_timeout * 1000))
            pipe.sadd(WORKERS, settings.name)
            pipe.execute()
        stop.wait(every)


def serve(settings: WorkerSettings, *, loglevel: str = "WARNING") -> None:
    """Run the worker until it is stopped (SIGTERM: Celery's warm shutdown, running tries finish first)."""
    incarnation = uuid.uuid4().hex
    os.environ[NAME_VARIABLE] = settings.name
    os.environ[INCARNATION_VARIABLE] = incarnation
    global _pool_settings
    _pool_settings = settings
    app = make_app(settings.celery)
    app.task(name=TASK_NAME, bind=True, store_errors_even_if_ignored=True)(run_and_store)
    from celery.signals import worker_ready

    worker_ready.connect(lambda **_: print(f"ledger worker {settings.name} ready", flush=True), weak=False)
    stop = threading.Event()
    threading.Thread(target=_beat, args=(settings, incarnation, stop), name="ledger-worker-heartbeat",
                     daemon=True).start()
    try:
        app.worker_main(["worker", f"--queues={','.join(settings.queues)}", f"--concurrency={settings.concurrency}",
                         f"--hostname=ledger@{settings.name}", f"--loglevel={loglevel}", "--without-gossip",
                         "--without-mingle", "--pool=prefork"])
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            redis_client(settings.celery.backend_url).delete(worker_key(settings.name))
