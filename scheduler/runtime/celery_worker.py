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
and the refusal is recorded (the job that follows the try writes it as an event). A running try holds a lease that
its pool process renews and fences itself on, and a guard process kills its process group should the pool process
die (scheduler/runtime/try_lease.py, decision 0200). A worker holds its name while it beats (claim_name). What
fails because of the fleet (the webserver unreachable, the worker's own machinery) ends the try `lost`, never
`failed`; an outcome Redis does not take is kept and delivered when it answers.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import http.client
import json
import os
import select
import shutil
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra import worker_client
from ledger.infra.code import sha256_bytes
from ledger.infra.code_files import materialise
from ledger.infra.logs import log_file
from ledger.infra.workers import (
    API_VARIABLE,
    INCARNATIONS_KEPT,
    NAME_VARIABLE,
    TOKEN_VARIABLE,
    WORKER_NAMES,
    WORKERS,
    incarnations_key,
    running_key,
    worker_key,
)
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.executors.celery_app import (
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
    seconds_from_env,
)
from ledger.scheduler.executors.fleet_faults import FaultNotes, FleetCounters, Relay
from ledger.scheduler.runtime import try_exits, try_outbox, try_plan, try_process, try_report
from ledger.scheduler.runtime.try_delivery import LogRest, store_state
from ledger.scheduler.runtime.try_lease import TryLease, claim_with_lease, end_lease, lease_value
from ledger.scheduler.runtime.try_outcome import EXIT_CODES, Outcome, describe_exception, one_line

INCARNATION_VARIABLE = "LEDGER_WORKER_INCARNATION"
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's: where a worker's processes count
MAIN_PID_VARIABLE = "LEDGER_WORKER_MAIN_PID"  # set by `ledger worker` for its pool processes: its main process
FETCH_PATIENCE_VARIABLE = "LEDGER_WORKER_CODE_FETCH_PATIENCE"
DEFAULT_FETCH_PATIENCE = 30.0
LOG_SHIP_INTERVAL = 0.5  # seconds between two chunks of a running try's log sent to the result backend
LOG_CHUNK = 256 * 1024
LOG_WITH_OUTCOME = 64 * 1024  # at most this much of a try's log not sent yet is sent with its outcome (decision 0316)
EXIT_RETIRED = 70  # a pool process exits with this once it has delivered a Spark try after which it must not run
# another (its JVM died, or the try's thread would not stop): Celery starts a new pool process in its place


@dataclass(frozen=True)
class WorkerSettings:
    name: str  # this worker's host name, as tries record it
    queues: tuple[str, ...]
    concurrency: int
    home: Path
    api_url: str
    token: str | None
    celery: CeleryConfig
    named: bool = True  # the name was given (--hostname, LEDGER_WORKER_NAME), not the host's by default
    fetch_patience: float = DEFAULT_FETCH_PATIENCE  # seconds a try asks again for code the webserver cannot give
    metrics_port: int = 0  # serve the fleet's fault counters on this port (0: not served)


class CodeFetchError(Exception):
    """A try's code could not be had: the fleet's fault, never the task's (its try ends lost, no retry spent)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient  # the webserver could not be reached or was failing: asking again may help


def fetch_code_patiently(settings: WorkerSettings, dag_id: str, version: str) -> tuple[str, str, bool]:
    """fetch_code(), asked again with back-off (0.5 s, doubling, at most 8 s apart) while the webserver cannot
    be reached or fails (a restart), for at most LEDGER_WORKER_CODE_FETCH_PATIENCE seconds."""
    until = time.monotonic() + settings.fetch_patience
    pause = 0.5
    faults = pool_faults()
    while True:
        try:
            return fetch_code(settings, dag_id, version)
        except CodeFetchError as exc:
            if not exc.transient:  # (a refusal, a version it does not know: the same answer again)
                raise
            faults.failed("code", f"ledger worker {settings.name}: {{error}}; asking again with back-off for up to "
                                  f"{settings.fetch_patience:g} s per try", str(exc))
            if time.monotonic() + pause > until:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 8.0)


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
                             f"HTTP {exc.code} {one_line(exc.read().decode('utf-8', 'replace'), 200)}",
                             transient=exc.code >= 500 or exc.code in (408, 429)) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, reset, timed out; a reply cut short
        raise CodeFetchError(f"cannot fetch the code of {dag_id} version {version[:12]} from {settings.api_url}: "
                             f"{exc}", transient=True) from None
    pool_faults().works("code", f"ledger worker {settings.name}: the webserver gives code again ({settings.api_url})")
    files = {path: base64.b64decode(text) for path, text in data["files"].items()}
    for path, content in files.items():
        if data.get("sha256", {}).get(path) not in (None, sha256_bytes(content)):
            raise CodeFetchError(f"the code of {dag_id} version {version[:12]}: {path} does not match its hash")
    key, entry, captured = str(data["key"]), str(data["entry"]), bool(data["captured"])
    root = materialise(base, key, files)
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(f".{index.name}.{os.getpid()}.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps({"key": key, "entry": entry, "captured": captured}), encoding="utf-8")
    os.replace(tmp, index)
    return str(root), str(root / entry), captured


class _LogShipper:
    """Writes what a try's log gained since the last call into `ledger:log:<task id>` at its own offset (SETRANGE:
    writing a chunk twice, as a client that retries after a lost reply does, changes nothing)."""

    def __init__(self, client: Any, tid: str, path: str, name: str = "", running_set: str | None = None) -> None:
        self.client, self.key, self.path, self.offset = client, log_key(tid), path, 0
        self.name = name  # the worker's
        self.running_set = running_set  # its worker's running set, while the try is in it
        self.shipped = hashlib.sha256()  # of the bytes sent so far: finish() sees whether the log was rewritten

    def ship(self, strict: bool = False) -> None:
        """(Redis unreachable for a moment: what was not sent is sent by a later call; `strict`: raises.)"""
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
        except redis_errors() as exc:  # (it restarts): sent again later
            if strict:
                raise
            pool_faults().failed("log", f"ledger worker {self.name}: cannot send tries' logs to Redis ({{error}}); "
                                        f"sending again", exc)
            return
        except OSError:  # reading the log here: sent again later
            return
        pool_faults().works("log", f"ledger worker {self.name}: sending tries' logs to Redis works again")

    def rest(self) -> tuple[int, bytes, bool]:
        """What the log gained since it was last sent, at its offset; or, when the try rewrote what was sent already
        (finish), the whole log at 0 (True). Nothing is sent: `took` says it was (with the try's outcome)."""
        try:
            with open(self.path, "rb") as log:
                head = log.read(self.offset)
                if hashlib.sha256(head).digest() == self.shipped.digest():
                    return self.offset, log.read(), False
                return 0, head + log.read(), True
        except OSError:  # (its file here cannot be read: what reached Redis stands)
            return self.offset, b"", False

    def took(self, at: int, data: bytes, whole: bool) -> None:
        """`rest()` reached Redis with the try's outcome, and its log's key in the same step (decision 0325)."""
        if whole:
            self.shipped = hashlib.sha256(data)
        else:
            self.shipped.update(data)
        self.offset = at + len(data)

    def finish(self) -> bool:
        """Once the try has ended: the rest of its log; or, when the try rewrote what was sent already (the secrets it
        read are masked as it ends), the whole log in place of what was sent. True: it was sent whole again. Raises
        when Redis does not take it (the outcome is stored after its log, never before)."""
        try:
            with open(self.path, "rb") as log:
                head = log.read(self.offset)
                if hashlib.sha256(head).digest() == self.shipped.digest():
                    self.ship(strict=True)
                    return False
                whole = head + log.read()
        except OSError:  # (its file here cannot be read: what reached Redis stands)
            return False
        self.client.set(self.key, whole, ex=KEEP)
        self.offset, self.shipped = len(whole), hashlib.sha256(whole)
        return True


def _settings_of_pool() -> WorkerSettings:
    global _pool_settings
    if _pool_settings is None:
        _pool_settings = settings_from_env()
    return _pool_settings


_pool_settings: WorkerSettings | None = None
_client: Any = None
_pool_faults: FaultNotes | None = None
_api_relay: Relay | None = None


def pool_faults() -> FaultNotes:
    """This pool process's faults of the fleet (made after the fork, so none is shared with the main process)."""
    global _pool_faults, _api_relay
    if _pool_faults is None:
        _pool_faults = FaultNotes("worker", _say, fleet_counters())
        # task code's calls to the webserver, made in the tries' processes this one forks, said and counted here
        name = _settings_of_pool().name
        _api_relay = Relay(_pool_faults, "api", f"ledger worker {name}: task code cannot reach ledger's webserver "
                                                f"({{error}}); its calls fail", f"ledger worker {name}: task code "
                                                                                f"reaches ledger's webserver again")
        worker_client.on_call = _api_relay.note
    return _pool_faults


def take_api_faults() -> None:
    """What this pool process's tries noted of their calls to the webserver, said and counted (pool_faults)."""
    if _api_relay is not None:
        _api_relay.take()


def _say(line: str) -> None:
    print(line, flush=True)


def fleet_counters() -> FleetCounters | None:
    """The fleet's counters of this process, when `ledger worker --metrics-port` serves them (its processes count
    in PROMETHEUS_MULTIPROC_DIR, which its main process sets before it forks its pool)."""
    return FleetCounters(None) if os.environ.get(MULTIPROC_VARIABLE) else None


def _redis() -> Any:
    global _client
    if _client is None:
        _client = redis_client(_settings_of_pool().celery.backend_url)
    return _client


def run_message(task: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The Celery task: run the try a message describes, once, under its lease, and store its outcome as the
    try's SUCCESS state (kept here until Redis takes it). The scheduler sends its messages with ignore_result (it
    keeps no result subscription per try), so Celery itself stores only a raised error or a revocation
    (store_errors_even_if_ignored). A refused redelivery (Ignore) stores nothing."""
    from celery.exceptions import Ignore

    settings = _settings_of_pool()
    client = _redis()
    tid = task.request.id
    incarnation = os.environ.get(INCARNATION_VARIABLE, "")
    mine = f"{settings.name} {uuid.uuid4().hex}"
    running_set = running_key(settings.name)
    faults = pool_faults()
    # its lease is taken with its claim (one round trip), so a Redis that does not answer stops it before any of its
    # code runs, and no Redis call that fails after its code has run can end it otherwise than its outcome
    lease_held = lease_value(f"{settings.name} {incarnation}", os.getpid(), None, settings.celery.heartbeat_timeout)
    try:
        claimed_at = time.monotonic()
        holder = claim_with_lease(client, tid, (claim_key(tid), mine, KEEP), running_set, lease_held,
                                  settings.celery.heartbeat_timeout)
        if holder is not None and holder.decode() != mine:  # (mine: a retry whose first reply was lost)
            client.rpush(REFUSED, dumps({"ti_id": payload["ti_id"], "try_number": payload["try_number"],
                                         "task_id": tid, "host": settings.name, "at": time.time(),
                                         "claimed_by": holder.decode().split(" ")[0] or None}))
            raise Ignore()  # Celery leaves the try's result as the first delivery writes it
    except redis_errors() as exc:  # (Celery stores the error if it can: the scheduler records the try lost)
        faults.failed("claim", f"ledger worker {settings.name}: cannot claim tries in Redis ({{error}}); their "
                               f"messages fail", exc)
        raise
    faults.works("claim", f"ledger worker {settings.name}: claiming tries in Redis works again")
    path = log_file(str(settings.home / "logs"), payload["dag_id"], payload["run_id"], payload["task_id"],
                    payload["try_number"], payload.get("map_index", -1))
    # the claim makes this the only delivery that writes the try's log here: a file already there is another try's
    # that had the same path (a database made again numbers its runs from 1 again), not to be shipped as this one's
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)
    shipper = _LogShipper(client, tid, path, settings.name, running_set)
    handed = False  # (the try's end is another's to say from then on: its guard's, the outbox's or its lease's)
    try:
        try:
            root, fileloc, captured = fetch_code_patiently(settings, payload["dag_id"], payload["dag_version"])
            item = item_from_json(payload, fileloc=fileloc, code_root=root, code_captured=captured, log_path=path)
        except (CodeFetchError, OSError, ValueError) as exc:
            item = item_from_json(payload, log_path=path)
            reason = one_line(str(exc) if isinstance(exc, CodeFetchError) else describe_exception(exc))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"[ledger] worker {settings.name}: {reason}\n")
            task.update_state(state="STARTED", meta=_started(settings, incarnation, os.getpid()))
            # code that could not be fetched is the fleet's fault, not the task's: lost (no retry spent; the job
            # fails the task after LEDGER_MAX_LOST_TRIES in a row); a work item it cannot read: failed
            state = "lost" if isinstance(exc, CodeFetchError) else "failed"
            handed = True  # (kept in the outbox before anything else)
            return _deliver(task, _result(settings, item, Outcome("failed", reason, time.time()), os.getpid(),
                                          state=state), shipper, None, path)
        plan = try_plan.prepare(item)
        if try_plan.runs_in_process(plan):  # a Spark try: this pool process's session (fenced by killing it)
            from ledger.scheduler.runtime import in_process

            lease = _lease(settings, tid, lease_held, claimed_at)
            lease.fence_with(lambda: os.kill(os.getpid(), signal.SIGKILL))
            try:
                task.update_state(state="STARTED", meta=_started(settings, incarnation, os.getpid()))
            except BaseException:
                lease.stop()
                raise
            lease.start()
            handed = True
            result = None
            try:
                here = in_process.run_in_process(item, plan)
                result = _result(settings, item, here.outcome, os.getpid(), left=here.report,
                                 state="lost" if here.lost else None)
                lease.finished()
                try_plan.forget_prepared()
            except BaseException as exc:  # this pool process is being stopped: the try ends with it (decision 0348),
                with contextlib.suppress(Exception):  # or, its code ended, it is recorded as it ended
                    _settle(client, task, settings, tid, item.log_path, incarnation, result, lease.value,
                            f"on worker {settings.name}, the pool process running it (pid {os.getpid()}) was "
                            f"stopped ({_stopped_by(exc)})")
                lease.stop()
                raise
            delivered = _deliver(task, result, shipper, lease, item.log_path)
            if here.retire:  # its outcome is stored (SUCCESS, which Celery never overwrites): this process goes
                _retire(settings, tid)
            return delivered
        lease = _lease(settings, tid, lease_held, claimed_at)
        box = try_outbox.folder(settings.home, settings.name)
        # its process leaves its report in the outbox the moment its code has ended (decision 0253), and says so once
        # its log is whole (decision 0315)
        drop = try_outbox.OutboxDrop(box, tid, path, incarnation, settings.name)
        try:
            running = try_process.fork_try(item, drop=drop)
        except BaseException:
            drop.close()
            lease.stop()
            raise
        guarded = False
        try:
            drop.forked()
            try_plan.forget_prepared()
            # a guard that cannot be forked (a pids or file limit reached) kills the try below: never a try left
            # running with no guard and no lease renewed, to be recorded lost and run again while it still runs
            _guard(lease, settings, task, tid, item, running, incarnation)
            guarded = handed = True
            # started when its process was forked (as the LocalExecutor says), not when its lease and guard were ready
            said = _say_started(task, settings, incarnation, running.pid, running.started_at)
            while (end := _end_of(running, drop, LOG_SHIP_INTERVAL)) is None:
                said = said or _say_started(task, settings, incarnation, running.pid, running.started_at)
                shipper.ship()
                take_api_faults()
        except BaseException as exc:  # this pool process is being stopped (a revocation: billiard turns its SIGTERM
            running.kill_unless_exited()  # into SystemExit; a cold shutdown), or the try's guard could not be made:
            running.wait()  # the try is killed, its lease and guard go with it
            if not guarded:  # (its lease says so: lost at the scheduler's next look, not once the lease has ended)
                lease.end(f"worker {settings.name} could not start its guard ({one_line(describe_exception(exc))}); "
                          f"its processes were killed")
            else:  # what its guard would say (decision 0348): an outcome it kept as its code ended, else its death
                with contextlib.suppress(Exception):
                    _settle(client, task, settings, tid, item.log_path, incarnation,
                            _left(settings, item.log_path, running.pid, running.said()), lease.value,
                            f"on worker {settings.name}, the pool process running it (pid {os.getpid()}) was stopped "
                            f"({_stopped_by(exc)}); its processes were killed")
            lease.stop()
            raise
        finally:
            drop.close()
        take_api_faults()
        if isinstance(end, try_report.TryReport):  # its code ended and its log is whole: delivered while its process
            # syncs the report and exits (decision 0315), then reaped (what it left in its group killed)
            return _deliver(task, try_outbox.result_of(end, running.pid, settings.name), shipper, lease,
                            item.log_path, kept=True, exiting=running)
        outcome = end
        if running.report is not None:  # its code ended: its outcome is in the outbox already, as it left it
            return _deliver(task, _result(settings, item, outcome, running.pid, left=running.report), shipper, lease,
                            item.log_path, kept=True)
        # killed here because its lease ended: lost (a try killed after its code ended left its report: above)
        fenced = lease.fenced is not None and running.killed()
        ended = "lost" if fenced else outcome.state
        why = f"worker {settings.name} killed it: {lease.fenced}" if fenced else outcome.reason
        # its state, kept at once (not yet fsynced): the guard finds it should this process die before the whole
        # outcome is kept (decision 0257)
        try_outbox.keep(box, tid, try_outbox.result_of(try_report.TryReport(ended, why, outcome.at, item.log_path,
                                                                            settings.name), running.pid,
                                                       settings.name), item.log_path, incarnation, sync=False)
        if fenced:
            lease.end(str(lease.fenced))
            return _deliver(task, _result(settings, item, outcome, running.pid, state="lost", reason=why), shipper,
                            lease, item.log_path)
        return _deliver(task, _result(settings, item, outcome, running.pid), shipper, lease, item.log_path)
    except BaseException as exc:
        if not handed:  # stopped (or failed) before its code ran or its guard was made: its lease says so at once
            with contextlib.suppress(Exception):
                end_lease(client, tid, lease_held, f"on worker {settings.name}, the pool process that claimed it "
                                                   f"(pid {os.getpid()}) ended before the try ran ({_stopped_by(exc)})")
        raise
    finally:
        if shipper.running_set is not None:  # (not delivered: no store took it out)
            with contextlib.suppress(Exception):
                client.srem(running_set, tid)
        if os.getppid() != _main_pid():  # the worker's main process is gone: so is this pool process
            os._exit(1)


def _end_of(running: try_process.RunningTry, drop: try_outbox.OutboxDrop,
            timeout: float) -> Outcome | try_report.TryReport | None:
    """Wait up to `timeout` seconds (less when the try's execution timeout comes first: it is killed then) for the
    try's end: the report its process left, once that process has said its log is whole (the process may still be
    syncing the report and exiting), or the outcome of a process gone without saying so; None: neither yet."""
    limits = [timeout] if running.deadline is None else [timeout, running.deadline - time.monotonic()]
    watched = [running.fileno()] if drop.ready_fd < 0 else [running.fileno(), drop.ready_fd]
    if drop.ready_fd in select.select(watched, [], [], max(0.0, min(limits)))[0] and drop.ready():
        report = drop.take()
        if report is not None and report.state in EXIT_CODES:
            return report
    return running.wait(0)


def _say_started(task: Any, settings: WorkerSettings, incarnation: str, pid: int, at: float) -> bool:
    """Store the try's STARTED state; False when Redis does not take it (said again while the try runs: its lease,
    taken already, holds it meanwhile, and its outcome says it started if it ends first)."""
    try:
        task.update_state(state="STARTED", meta=_started(settings, incarnation, pid, at))
    except Exception as exc:
        pool_faults().failed("claim", f"ledger worker {settings.name}: cannot say in Redis that tries started "
                                      f"({{error}}); said again while they run", one_line(str(exc), 200))
        return False
    pool_faults().works("claim", f"ledger worker {settings.name}: claiming tries in Redis works again")
    return True


def _guard(lease: TryLease, settings: WorkerSettings, task: Any, tid: str, item: WorkItem,
           running: try_process.RunningTry, incarnation: str) -> None:
    """Fence the try through its lease from now on, and guard it: should this pool process die (kill -9 of it, or
    of the worker's main process, which Celery's pool processes die with), a small process it forks kills the try's
    process group. When the try had ended by itself before (its report in the worker's outbox, or, when none could be
    left there, its state in its result pipe), the guard stores that outcome (kept in the outbox first); else it says
    in the lease that the try is dead."""
    main, url, me, name = _main_pid(), settings.celery.backend_url, os.getpid(), settings.name

    def after(message: bytes) -> None:  # (in the guard, once the try's group is killed)
        import redis

        client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        who = (f"its worker's main process (pid {main}) died, and with it" if not _alive(main) else "")
        _settle(client, task, settings, tid, item.log_path, incarnation,
                _left(settings, item.log_path, running.pid, try_process.decode_message(message)), lease.value,
                f"{who or 'on worker ' + name + ','} the pool process running it (pid {me}) died; its processes were "
                f"killed")

    lease.fence_with(running.kill_unless_exited)
    lease.guard = try_process.GroupGuard(running.pid, after, running.result_fd)
    lease.start()


def _settle(client: Any, task: Any, settings: WorkerSettings, tid: str, log_path: str, incarnation: str,
            ended: dict[str, Any] | None, lease_value: str, dead: str) -> None:
    """What becomes of a try whose supervisor cannot see it to its end (its pool process died, or is being stopped),
    once its processes are killed: the outcome kept in the outbox as its code ended (else `ended`, the result of how
    it ended as far as its supervisor knows, kept here first) is delivered; kept on disk, it is delivered by the
    worker's beat (or its next incarnation's) should Redis not take it now. With no outcome, or one Redis did not take
    and no disk kept, its lease says it is dead (`dead`), so the scheduler records its end at once, not once the lease
    has run out."""
    box = try_outbox.folder(settings.home, settings.name)
    kept = try_outbox.kept_one(box, tid)  # its report, left as its code ended, or what the pool process kept
    if kept is None and ended is not None:
        entry = {"tid": tid, "result": ended, "log": log_path}
        try:
            kept = try_outbox.keep(box, tid, ended, log_path, incarnation), entry
        except OSError:  # (a full disk: delivered from memory, or not at all)
            kept = box / f"{tid}.json", entry
    if kept is not None:
        try:
            try_outbox.deliver(*kept, client, _store(task))
            return
        except Exception:
            if kept[0].exists():  # (kept on disk: the worker's beat delivers it once Redis answers)
                return
    end_lease(client, tid, lease_value, dead)


def _left(settings: WorkerSettings, log_path: str, pid: int,
          said: tuple[str, str | None] | None) -> dict[str, Any] | None:
    """The result of a try that left no report but wrote its state as it ended (`said`: its result pipe's)."""
    if said is None:
        return None
    return try_outbox.result_of(try_report.left_behind(log_path, said[0], said[1], time.time(), settings.name), pid,
                                settings.name)


def _stopped_by(exc: BaseException) -> str:
    """Why a pool process unwinds from a try, as its lease says it."""
    if isinstance(exc, SystemExit):
        return "SIGTERM: a revocation, or its worker's shutdown"
    return one_line(describe_exception(exc))


def _main_pid() -> int:
    return int(os.environ.get(MAIN_PID_VARIABLE) or os.getppid())


def _lease(settings: WorkerSettings, tid: str, value: str, taken_at: float) -> TryLease:
    """The try's lease, taken with its claim at time.monotonic() `taken_at` and renewed by a thread once started;
    renewed here first when a third of its length has passed since (a slow first fetch of the version's code):
    Redis must answer, the try has not started as far as the scheduler knows, and it is not forked yet."""
    length = settings.celery.heartbeat_timeout
    lease = TryLease(_lease_client(length), tid, value, length, lambda: None, _main_pid(), faults=pool_faults(),
                     holder=settings.name)
    lease.taken(taken_at)
    if lease.due():
        lease.renew()
    return lease


def _lease_client(length: float) -> Any:
    """A client that gives up on a call within a sixth of the lease (a renewal that hangs must not outlast the
    lease by more than that: the scheduler's grace is a third)."""
    global _lease_redis
    if _lease_redis is None:
        import redis

        wait = max(0.1, min(5.0, length / 6))
        _lease_redis = redis.Redis.from_url(_settings_of_pool().celery.backend_url, socket_timeout=wait,
                                            socket_connect_timeout=wait)
    return _lease_redis


_lease_redis: Any = None


def _store(task: Any) -> Callable[[str, dict[str, Any]], None]:
    """Store a try's outcome as its SUCCESS state (the result backend's own call, as update_state makes it)."""
    return lambda tid, result: task.backend.store_result(tid, result, "SUCCESS")


def _retire(settings: WorkerSettings, tid: str) -> None:
    """End this pool process after a try whose outcome is stored and after which it must run no other: its Spark
    session's JVM died (every later Spark try here would fail) or the try's thread would not stop (decision 0345).
    Celery's pool starts another process in its place; the state Celery then stores for the task
    (WorkerLostError) does not replace the outcome stored as its SUCCESS."""
    print(f"ledger worker {settings.name}: pool process {os.getpid()} ends after try {tid} (its Spark session's JVM "
          f"died, or the try's code would not stop); Celery starts another in its place", flush=True)
    os._exit(EXIT_RETIRED)


def _deliver(task: Any, result: dict[str, Any], shipper: _LogShipper, lease: TryLease | None,
             log_path: str, *, kept: bool = False, exiting: try_process.RunningTry | None = None) -> dict[str, Any]:
    """Keep the try's outcome in the worker's outbox (on disk, before any Redis call: it survives this process and
    its worker; `kept`: the try's process left it there already), then store it as its SUCCESS state with the rest
    of its log (after it, when the rest is long: decision 0316); while Redis does not answer, keep trying (the lease
    renewed meanwhile): a try that ran to its end is recorded as it ended. `exiting`: the try's process, which has
    not exited yet (decision 0315): once the outcome is stored, it is reaped, its guard let go, its lease stopped and
    its outbox file removed when it exits, by this process's watch thread (decision 0326: this pool process is free
    for its next try at once); after a store Redis did not take, it is waited for here and its guard let go before the
    store is tried again (so no guard outlives its try's process by long: it kills the try's group by its process
    id)."""
    settings = _settings_of_pool()
    box = try_outbox.folder(settings.home, settings.name)
    kept_at = (box / f"{task.request.id}.json") if kept else try_outbox.keep(
        box, task.request.id, result, log_path, os.environ.get(INCARNATION_VARIABLE, ""))
    if lease is not None:
        lease.finished()  # (nothing fenced any more: the outcome survives this process in the outbox)
        if exiting is None:  # (its process was reaped: the guard has nothing left to kill)
            lease.let_guard_go()
    pause = 0.2
    said = False
    faults, name = pool_faults(), result.get("host")
    try:
        while True:
            try:
                at, rest, whole = shipper.rest()
                if len(rest) <= LOG_WITH_OUTCOME:  # the rest of its log rides with the outcome: one round trip,
                    # which also writes it into the log's key and takes the try out of its worker's running set
                    result["log_tail"] = [at, base64.b64encode(rest).decode("ascii")]
                    result["log_rewritten"] = whole or result.get("log_rewritten", False)
                    result["log_bytes"] = at + len(rest)
                    store_state(shipper.client, task.backend, task.request.id, "SUCCESS", result,
                                log=LogRest(at, rest, whole), running_set=shipper.running_set)
                    shipper.took(at, rest, whole)
                else:  # (its log first, then the outcome: the scheduler reads the log once it has the outcome)
                    result.pop("log_tail", None)
                    result["log_rewritten"] = shipper.finish() or result.get("log_rewritten", False)
                    result["log_bytes"] = shipper.offset
                    store_state(shipper.client, task.backend, task.request.id, "SUCCESS", result,
                                running_set=shipper.running_set)
                shipper.running_set = None  # (left it with the store)
                if exiting is not None:  # (its process syncs its report and exits: what is left waits for that)
                    try_exits.after_exit(exiting, _after_exit(lease, kept_at))
                    lease = None
                else:
                    if lease is not None:  # (before the outbox file goes: a guard that finds none says the try is dead)
                        lease.let_guard_go()
                    try_outbox.forget(kept_at)
                if said:
                    print(f"ledger worker {name}: the outcome of {task.request.id} was delivered", flush=True)
                faults.works("outcome", f"ledger worker {name}: delivering outcomes to Redis works again")
                return result
            except Exception as exc:
                if not said:
                    faults.failed("outcome", f"ledger worker {name}: cannot deliver outcomes to Redis ({{error}}); "
                                             f"each is kept until Redis answers", one_line(f"{type(exc).__name__}: "
                                                                                           f"{exc}", 200))
                    print(f"ledger worker {name}: the outcome of {task.request.id} is kept here until Redis answers",
                          flush=True)
                    said = True
                if exiting is not None:  # (Redis may be gone for long: the try's process is reaped meanwhile)
                    exiting.wait()
                    exiting = None
                    if lease is not None:
                        lease.let_guard_go()
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
    finally:
        if lease is not None:
            lease.stop()


def _after_exit(lease: TryLease | None, kept_at: Path) -> Callable[[], None]:
    """What is left of a delivered try once its process has exited and been reaped: its guard let go and its lease
    stopped, then its outbox file removed (a guard that finds none says the try is dead)."""
    def then() -> None:
        if lease is not None:
            lease.stop()
        try_outbox.forget(kept_at)
    return then


def run_and_store(task: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """(run_message: it stores the outcome itself.)"""
    return run_message(task, payload)


def _started(settings: WorkerSettings, incarnation: str, pid: int, at: float | None = None) -> dict[str, Any]:
    return {"host": settings.name, "pid": pid, "at": time.time() if at is None else at, "incarnation": incarnation}


def _result(settings: WorkerSettings, item: WorkItem, outcome: Outcome, pid: int, *,
            state: str | None = None, reason: str | None = None,
            left: try_report.TryReport | None = None) -> dict[str, Any]:
    """The outcome of a try: the report its process `left` as its code ended, else how it ended (or `state` and
    `reason` in its place: "lost", why) with nothing it made. Nothing here reaches Redis."""
    if state == "lost":
        with contextlib.suppress(OSError), open(item.log_path, "a", encoding="utf-8") as log:
            log.write(f"[ledger] lost: {reason or outcome.reason}\n")
    return try_outbox.result_of(try_report.of_try(None if state else left, item.log_path, state or outcome.state,
                                                  reason or outcome.reason, outcome.at, settings.name),
                                pid, settings.name)


def settings_from_env(env: dict[str, str] | None = None, *, name: str | None = None,
                      queues: tuple[str, ...] = ("default",), concurrency: int | None = None,
                      metrics_port: int = 0) -> WorkerSettings:
    env = dict(os.environ) if env is None else env
    api = (env.get(API_VARIABLE) or "").strip()
    if not api.startswith(("http://", "https://")):
        raise ConfigError(f"a worker needs {API_VARIABLE}: the URL of ledger's webserver, where it fetches the "
                          f"code of the versions it runs (e.g. http://scheduler-host:8793)")
    home = Path(env.get("LEDGER_HOME") or Path.home() / ".ledger").expanduser().resolve()
    given = name or env.get(NAME_VARIABLE)
    return WorkerSettings(
        name=given or socket.gethostname(), queues=queues,
        concurrency=concurrency or os.cpu_count() or 1, home=home, api_url=api,
        token=(env.get(TOKEN_VARIABLE) or "").strip() or None, celery=CeleryConfig.from_env(env),
        named=given is not None,
        fetch_patience=seconds_from_env(env, FETCH_PATIENCE_VARIABLE, DEFAULT_FETCH_PATIENCE),
        metrics_port=metrics_port)


def _entry(settings: WorkerSettings, incarnation: str, started: float, running: list[str]) -> str:
    return dumps({"name": settings.name, "host": socket.gethostname(), "pid": os.getpid(),
                  "queues": list(settings.queues), "concurrency": settings.concurrency, "running": running,
                  "heartbeat": time.time(), "started": started, "incarnation": incarnation})


def _alive(pid: int) -> bool:
    """Is process `pid` running (a zombie is not)?"""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # (no /proc: ask the kernel)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _write_entry(client: Any, settings: WorkerSettings, incarnation: str, entry: str) -> dict[str, Any] | None:
    """Write this worker's entry unless a live worker of another incarnation holds the name: then that one's
    entry (nothing written). A holder that was this host's worker and whose process is gone, or is this very process
    (its consumer restarted, see cli/worker.py), is this worker's predecessor (a restart): the name is taken over."""
    import redis

    key = worker_key(settings.name)
    while True:
        with client.pipeline() as pipe:
            try:
                pipe.watch(key)
                raw = pipe.get(key)
                held = json.loads(raw) if raw else None
                if held is not None and held.get("incarnation") != incarnation and not (
                        held.get("host") == socket.gethostname() and (
                            int(held.get("pid") or 0) == os.getpid() or not _alive(int(held.get("pid") or 0)))):
                    return dict(held)
                pipe.multi()
                pipe.set(key, entry, px=int(settings.celery.heartbeat_timeout * 1000))
                pipe.sadd(WORKERS, settings.name)
                pipe.sadd(WORKER_NAMES, settings.name)
                pipe.hset(incarnations_key(settings.name), incarnation, entry)
                pipe.expire(incarnations_key(settings.name), KEEP)
                pipe.execute()
                return None
            except redis.WatchError:  # (written meanwhile: look again)
                continue


def claim_name(settings: WorkerSettings, incarnation: str) -> tuple[WorkerSettings, str | None]:
    """This worker's name, held in Redis for as long as it beats. A name held by another live worker is refused
    when it was given (one line); the host's name, taken by default, becomes `<host>-2`, `<host>-3`... (the first
    free). Returns the settings with the name, and a note when it is not the one asked for (or took over from a
    predecessor that died)."""
    client = redis_client(settings.celery.backend_url)
    try:
        first: dict[str, Any] | None = None  # who holds the name asked for
        for n in range(1, 100):
            mine = settings if n == 1 else dataclasses.replace(settings, name=f"{settings.name}-{n}")
            held = _write_entry(client, mine, incarnation, _entry(mine, incarnation, time.time(), []))
            if held is None:
                _trim_incarnations(client, mine.name)
                return mine, (None if first is None else f"{settings.name} is the name of a live worker (pid "
                                                         f"{first.get('pid')} on {first.get('host')})")
            if first is None:
                first = held
                if settings.named:
                    raise ConfigError(
                        f"worker name {settings.name!r} is held by a live worker (pid {held.get('pid')} on "
                        f"{held.get('host')}): give this one another --hostname")
    except redis_errors() as exc:
        raise ConfigError(f"cannot reach the result backend to claim the worker's name: {exc}") from None
    finally:
        client.close()
    raise ConfigError(f"the names {settings.name} to {settings.name}-99 are all held by live workers")


def _trim_incarnations(client: Any, name: str) -> None:
    """The name's incarnations on record beyond the INCARNATIONS_KEPT newest forgotten."""
    kept = client.hgetall(incarnations_key(name))
    old = sorted(kept, key=lambda k: float(json.loads(kept[k]).get("started") or 0), reverse=True)[INCARNATIONS_KEPT:]
    if old:
        client.hdel(incarnations_key(name), *old)


def redis_errors() -> tuple[type[Exception], ...]:
    import redis

    return (redis.RedisError,)


def _beat(settings: WorkerSettings, incarnation: str, stop: threading.Event,
          counters: FleetCounters | None = None, store: Callable[[str, dict[str, Any]], None] | None = None) -> None:
    """Every third of the heartbeat timeout: this worker's entry (host, queues, concurrency, running tries),
    which expires when it stops beating (never written over another live worker's, see _write_entry); and the
    outcomes in its outbox whose writer died before storing them (`store`: the result backend's)."""
    client = redis_client(settings.celery.backend_url)
    box = try_outbox.folder(settings.home, settings.name)
    every = settings.celery.heartbeat_timeout / 3
    started = time.time()
    said = None
    faults = FaultNotes("worker", _say, counters)
    while not stop.is_set():
        try:
            running = sorted(member.decode() for member in client.smembers(running_key(settings.name)))
            held = _write_entry(client, settings, incarnation, _entry(settings, incarnation, started, running))
            if held is not None and said != held.get("incarnation"):
                print(f"ledger worker {settings.name}: another worker (pid {held.get('pid')} on {held.get('host')}) "
                      f"took this name while this one could not beat; its tries' leases still hold", flush=True)
            said = held.get("incarnation") if held is not None else None
            if store is not None:
                for tid in try_outbox.deliver_orphans(box, client, store, _alive):
                    print(f"ledger worker {settings.name}: delivered the outcome of {tid} kept in its outbox",
                          flush=True)
            faults.works("beat", f"ledger worker {settings.name}: beats again")
        except Exception as exc:  # (the broker's Redis restarting: beat again when it is back)
            faults.failed("beat", f"ledger worker {settings.name}: cannot beat ({{error}}); trying again every "
                                  f"{round(every, 1):g} s", exc)
        stop.wait(every)


def serve(settings: WorkerSettings, incarnation: str, *, loglevel: str = "WARNING") -> bool:
    """Run the worker until it is stopped (SIGTERM: Celery's warm shutdown, running tries finish first). True:
    Celery's consumer stopped by itself on an error it does not recover from (kombu's Redis transport restoring
    unacknowledged messages on a connection a Redis restart closed, kombu issue 582), not because it was asked to:
    the caller starts it again (cli/worker.py). Its running tries have finished by then (a warm shutdown)."""
    os.environ[NAME_VARIABLE] = settings.name
    os.environ[INCARNATION_VARIABLE] = incarnation
    os.environ[MAIN_PID_VARIABLE] = str(os.getpid())
    global _pool_settings
    _pool_settings = settings
    app = make_app(settings.celery)
    # a store of a try's state gives up within 5 s and is made again on a new connection (decision 0257): with
    # Celery's default (120 s) a store sent into a partition waits on TCP's retransmissions long after the link is
    # back, and the scheduler stops waiting for the outcome first
    app.conf.update(redis_socket_timeout=5.0, redis_socket_connect_timeout=5.0)
    app.task(name=TASK_NAME, bind=True, store_errors_even_if_ignored=True)(run_and_store)
    from celery.signals import worker_init, worker_ready, worker_shutting_down

    worker_ready.connect(lambda **_: print(f"ledger worker {settings.name} ready", flush=True), weak=False)
    asked = threading.Event()  # a signal asked it to stop (Celery says so before it stops)
    worker_shutting_down.connect(lambda **_: asked.set(), weak=False)
    controllers: list[Any] = []  # Celery's worker (its exit status once it stopped)
    worker_init.connect(lambda sender=None, **_: controllers.append(sender), weak=False)
    stop = threading.Event()
    metrics = _serve_metrics(settings, incarnation) if settings.metrics_port else None
    store = app.backend.store_result
    threading.Thread(target=_beat, args=(settings, incarnation, stop, fleet_counters(),
                                         lambda tid, result: store(tid, result, "SUCCESS")),
                     name="ledger-worker-heartbeat", daemon=True).start()
    try:
        app.worker_main(["worker", f"--queues={','.join(settings.queues)}", f"--concurrency={settings.concurrency}",
                         f"--hostname=ledger@{settings.name}", f"--loglevel={loglevel}", "--without-gossip",
                         "--without-mingle", "--pool=prefork"])
        code = getattr(controllers[-1], "exitcode", 0) if controllers else 0
        return bool(code) and not asked.is_set()
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            redis_client(settings.celery.backend_url).delete(worker_key(settings.name))
        if metrics is not None:
            metrics.shutdown()
            shutil.rmtree(os.environ.pop(MULTIPROC_VARIABLE, ""), ignore_errors=True)


def _serve_metrics(settings: WorkerSettings, incarnation: str) -> Any:
    """Serve the fleet's fault counters of this worker's processes (its pool processes' too: prometheus_client's
    multiprocess mode, in a folder of this incarnation's) on LEDGER_METRICS_HOST:--metrics-port/metrics. Chosen
    before prometheus_client is first imported here, and before the pool is forked."""
    folder = settings.home / "worker-metrics" / incarnation
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[MULTIPROC_VARIABLE] = str(folder)
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    host = os.environ.get("LEDGER_METRICS_HOST") or "127.0.0.1"
    try:
        server, _thread = start_http_server(settings.metrics_port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {host}:{settings.metrics_port}: {exc.strerror or exc}") from None
    print(f"ledger worker {settings.name}: metrics on http://{host}:{settings.metrics_port}/metrics", flush=True)
    return server


def wait_for_redis(settings: WorkerSettings) -> None:
    """Until the result backend's Redis answers (a restarted consumer claims its name there first)."""
    client = redis_client(settings.celery.backend_url)
    try:
        while True:
            try:
                client.ping()
                return
            except redis_errors():
                time.sleep(1.0)
    finally:
        client.close()
