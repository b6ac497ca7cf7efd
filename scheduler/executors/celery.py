"""CeleryExecutor: tries run on `ledger worker` processes on any host, through Celery
(scheduler/executors/celery_app.py).

submit_all() sends the loop's tries from the job's thread at once, as one batch (kombu's Producer.batch: one
pipeline on a Redis broker), asking Celery to keep no result subscription (the worker stores each state itself, see
scheduler/runtime/celery_worker.py), then marks them queued in one round trip. A send that fails (or that finds the
sender busy) leaves the messages queued for the sender, a thread that sends them again with retries while the
broker is unreachable, and sends everything after them too until the broker answers again: the job's loop waits on
a working broker for a round trip per batch, never on a failing one longer than SEND_TIMEOUT (decision 193). The
sender also sends kill()'s revocations. A second thread, the reader, waits on the result backend's publications of
the tries' states (the Redis result backend publishes every state it stores on the key's channel; one pattern
subscription receives them all as they are written, so the reader sleeps until something happens instead of
polling): STARTED with host and pid, then the outcome. Every FALLBACK_INTERVAL it also reads the state of
every try in flight in one MGET (what a publication lost while Redis restarted, or sent before the subscription,
is found there), appends each running try's new log parts to its log file on this host (`ledger tasks logs
--follow` reads it here while it runs; the whole log goes to the database with the try's end), and every
WORKER_CHECK_INTERVAL reads the leases of the started tries (`ledger:lease:<task id>`, decision 0200): a try whose
lease says it is dead, or has been missing for its length and a third more, is lost. What it read is handed to
the job by drain(); a pipe it writes to wakes the job's loop: at once for ends, lost tries and remarks, for starts
alone STARTS_WAKE_DELAY later.

A try whose message no worker claimed within the queued timeout (LEDGER_CELERY_QUEUED_TIMEOUT, 600 s as Airflow's
task_queued_timeout) is sent again, as the same try: it never started, and a worker's claim (SET NX on its task id)
still lets only one delivery run it. The job records a `try_resent` event for each (see unclaimed()).

Remote tries outlive this process: end() lets running tries finish within the grace period, then leaves them
running (left_running()); the job that takes their runs over adopts them (adopt()), as one that took over from a
job killed with kill -9 does.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem
from ledger.scheduler.executors.celery_app import (
    KEEP,
    REFUSED,
    TASK_NAME,
    CeleryConfig,
    claim_key,
    item_to_json,
    log_key,
    make_app,
    queued_key,
    redis_client,
    task_id,
    task_id_pattern,
)
from ledger.scheduler.executors.fleet_faults import FaultNotes, counters_of
from ledger.scheduler.runtime.try_lease import lease_key, taken_value
from ledger.scheduler.runtime.try_report import ReportRefused, TryReport

POLL_INTERVAL = 0.05  # seconds between two looks at what is left to do while end() waits
READ_TIMEOUT = 0.25  # seconds the reader waits for a publication before it looks at its other work
STARTS_WAKE_DELAY = 0.2  # seconds tries' starts alone may wait before the job is woken for them
FALLBACK_INTERVAL = 0.5  # seconds between two reads of every try's state (what a lost publication held)
WORKER_CHECK_INTERVAL = 1.0  # seconds between two looks at the running tries' leases
LEASE_GRACE = 1 / 3  # share of a lease's length the executor waits beyond it before it takes a missing lease
# lease lengths it then waits for an outcome its worker kept (a try that ended while its worker was cut off) before
# the try is lost (decision 0257)
OUTCOME_PATIENCE = 2.0
# the claim a scheduler that takes over puts on a try it finds no trace of in Redis (find)
ADOPTION_CLAIM = "(adoption)"
LOG_INTERVAL = 0.5  # seconds between two reads of a running try's log (a worker sends it this often)
SCHEDULER_CLAIM = "scheduler lost"  # a raised try's claim as the scheduler takes it: no delivery runs it then
FINISHED = ("SUCCESS", "FAILURE", "REVOKED")
# how a worker says a try ended (lost: the fleet's fault; up_for_reschedule: a sensor's next check)
ENDS = ("success", "failed", "skipped", "lost", "up_for_reschedule")


@dataclass
class _Try:
    item: WorkItem
    tid: str
    sent: bool = False
    sent_at: float | None = None  # the executor's clock when its message was last sent (or it was adopted)
    started: bool = False  # its "started" was reported
    host: str | None = None
    log_bytes: int = 0  # bytes of its log appended here so far
    whole: bytes | None = None  # the whole of those bytes when one read brought them all (not read back from the file)
    next_log: float = 0.0  # time.monotonic() when its log is read again while it runs
    seen: bytes | None = None  # its state as last read (decoded again only when it changes)
    lease: bytes | None = None  # its lease as its supervisor holds it (the same bytes while it renews it)
    lease_length: float = 0.0  # seconds, as the lease says
    lease_seen: float | None = None  # the executor's clock when its lease was last seen held (or it started)
    killed: str | None = None  # why kill() ended it
    revoked_at: float | None = None  # the executor's clock when its revocation was last sent
    done: bool = False


@dataclass
class _Shared:
    """What the thread and the job's thread share, under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    tries: dict[int, _Try] = field(default_factory=dict)  # ti id -> try in flight
    outbox: collections.deque[tuple[str, Any]] = field(default_factory=collections.deque)  # ("send"|"revoke", ...)
    events: list[TaskEvent] = field(default_factory=list)
    remarks: list[dict[str, Any]] = field(default_factory=list)


class CeleryExecutor(Executor):
    outlives_its_job = True

    def __init__(self, parallelism: int, config: CeleryConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parallelism)
        self.config = config or CeleryConfig.from_env()
        self._clock = clock  # measures how long sent tries wait unclaimed
        self._shared = _Shared()
        self._started = False
        self._ending = False
        self._stop = threading.Event()
        self._kick = threading.Event()  # set by submit() and kill(): the thread sends at once
        self._threads: list[threading.Thread] = []
        self._new_starts = 0  # starts handed over since the reader last looked (under the lock)
        self._by_tid: dict[str, _Try] = {}  # the tries in flight by task id (the reader's, under the lock)
        self._wake_r, self._wake_w = -1, -1
        self._left: set[int] = set()
        # what fails now ("send", "read", "revoke", "adopt"), said and counted (_fault)
        self._faults = FaultNotes("executor", lambda line: print(line, file=sys.stderr, flush=True))
        self._blind = False  # the reader could not read Redis since it last read the leases
        self._send_lock = threading.Lock()  # one thread sends at a time: the job's or the sender
        self._unmarked: list[str] = []  # task ids sent and not yet marked queued (under _send_lock)
        self._metrics: Any = None
        self._queues: set[str] = set()  # the queues whose gauges were set

    def use_metrics(self, metrics: Any) -> None:
        self._metrics = metrics
        self._faults.counters = counters_of(metrics)

    def use_say(self, say: Callable[[str], None]) -> None:
        self._faults.say = say

    _FAULTS = {"send": "sending tries to the broker", "read": "reading the tries' states from Redis",
               "revoke": "revoking tries through the broker", "adopt": "looking up the tries to adopt in Redis"}

    def _fault(self, kind: str, exc: BaseException | None) -> None:
        """Note that `kind` of work fails (`exc`) or works again (None): one line when it starts failing, one when
        it works again (not one per retry), each counted (scheduler/executors/fleet_faults.py)."""
        if exc is None:
            self._faults.works(kind, f"celery executor: {self._FAULTS[kind]} works again")
        else:
            self._faults.failed(kind, f"celery executor: {self._FAULTS[kind]} fails ({{error}}); trying again", exc)

    @property
    def send_problem(self) -> str | None:
        """The last send's error (None: the broker answered it)."""
        return self._faults.error("send")

    @property
    def problem(self) -> str | None:
        """The last error talking to Redis (reading, revoking, adopting)."""
        return self._faults.error("read") or self._faults.error("revoke") or self._faults.error("adopt")

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            raise RuntimeError("CeleryExecutor already started")
        self._app = make_app(self.config, sending=True)
        self._client = redis_client(self.config.backend_url)
        self._meta_key = self._app.backend.get_key_for_task
        self._prefix_len = len(self._meta_key(task_id_pattern())) - len(task_id_pattern())  # of a state key
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stop.clear()
        self._threads = [threading.Thread(target=run, name=name, daemon=True)
                         for run, name in ((self._send_loop, "ledger-celery-sender"),
                                           (self._read_loop, "ledger-celery-reader"))]
        for thread in self._threads:
            thread.start()
        self._started, self._ending = True, False

    def end(self, grace: float) -> list[TaskEvent]:
        """Running tries get `grace` seconds to finish; the others run on (left_running())."""
        if not self._started:
            return []
        self._ending = True
        until = time.monotonic() + max(0.0, grace)
        events = self.drain()
        while self.in_flight() and time.monotonic() < until:
            time.sleep(POLL_INTERVAL)
            events += self.drain()
        deadline = time.monotonic() + 5.0
        while (self._shared.outbox or self._unmarked) and time.monotonic() < deadline:  # send (and mark) them first
            time.sleep(POLL_INTERVAL)
        if unsent := sum(1 for kind, _entry in self._shared.outbox if kind == "send"):
            self._faults.say(f"celery executor: {unsent} tries' messages were not sent before the scheduler stopped "
                             f"(the broker: {self.send_problem or 'busy'})")
        self._stop.set()
        self._kick.set()
        for thread in self._threads:
            thread.join(timeout=5.0)
        events += self.drain()
        self._left = self.in_flight()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1
        self._started = False
        return events

    def left_running(self) -> set[int]:
        return set(self._left)

    # -- the interface --------------------------------------------------------------------------
    def open_slots(self) -> int:
        if not self._started or self._ending:
            return 0
        return max(0, self.parallelism - len(self._shared.tries))

    def submit(self, item: WorkItem) -> None:
        self.submit_all([item])

    def submit_all(self, items: list[WorkItem]) -> None:
        """The items' messages sent together, from this thread, right away (_send_here); or by the sender, kicked
        once for them all, when the broker failed the last send."""
        if not items:
            return
        if not self._started or self._ending:
            raise RuntimeError("CeleryExecutor is not accepting work (not started, or ending)")
        try:
            with self._shared.lock:
                for item in items:
                    if item.ti_id in self._shared.tries:
                        raise ValueError(f"task instance {item.ti_id} is already in flight")
                    if len(self._shared.tries) >= self.parallelism:
                        raise RuntimeError("no open slot: check open_slots() before submit()")
                    entry = _Try(item, task_id(item.ti_id, item.try_number, item.database))
                    self._shared.tries[item.ti_id] = entry
                    self._by_tid[entry.tid] = entry
                    self._shared.outbox.append(("send", entry))
        finally:  # (what was handed over is sent even if a later item was refused)
            if not self._send_here():
                self._kick.set()

    def find(self, tries: list[tuple[WorkItem, bool]]) -> dict[int, Any]:
        """The tries the job that held them before handed to workers: every one is followed, none is judged here,
        since what Redis holds of a try proves nothing of whether it runs (decision 0336). A try recorded started
        is followed as started: its lease decides (_check_leases: missing for its length and a third more, counted
        from the adoption, it is taken, which a supervisor that comes back answers by killing its try; the try is
        lost once no outcome came after that). After a restart of Redis without its data, the lease is back only at
        its supervisor's next renewal. A try not recorded started that Redis knows of (its queued mark, state or
        lease) is followed as sent: its state says when it starts, else the queued timeout sends it again or takes
        it as started on whoever claimed it (_resend_unclaimed). One Redis knows nothing of may still run (a worker
        claimed it before the dead job recorded its start, and Redis then lost its data) or never have been sent:
        it is claimed here (ADOPTION_CLAIM: a message of it a worker took before is refused) and followed as
        started, so its lease decides. When Redis cannot be read, every try is followed as it was recorded."""
        if not self._started or not tries:
            return {}
        tids = [task_id(item.ti_id, item.try_number, item.database) for item, _ in tries]
        unknown: set[int] = set()
        try:
            pipe = self._client.pipeline()
            for tid in tids:
                pipe.exists(queued_key(tid), self._meta_key(tid), lease_key(tid))
            counts = pipe.execute()
            nothing = {i for i, ((_item, started), count) in enumerate(zip(tries, counts, strict=True))
                       if not count and not started}
            if nothing:
                pipe = self._client.pipeline()
                for i in sorted(nothing):  # (a claim already there, a worker's or an earlier look's, is kept)
                    pipe.set(claim_key(tids[i]), f"{ADOPTION_CLAIM} {os.getpid()}", nx=True, ex=KEEP)
                pipe.execute()
            unknown = nothing  # (only once claimed: one whose claim failed is followed as recorded, as sent)
        except Exception as exc:
            self._fault("adopt", exc)
        else:
            self._fault("adopt", None)
        return {item.ti_id: (item, started or i in unknown, tid)
                for i, ((item, started), tid) in enumerate(zip(tries, tids, strict=True))}

    def follow(self, found: dict[int, Any]) -> None:
        now = self._clock()  # (a started try's lease is judged from its adoption on)
        with self._shared.lock:
            for item, started, tid in found.values():
                if item.ti_id not in self._shared.tries:
                    self._shared.tries[item.ti_id] = self._by_tid[tid] = _Try(
                        item, tid, sent=True, started=started, sent_at=now, lease_seen=now if started else None)

    def drain(self) -> list[TaskEvent]:
        if self._wake_r >= 0:
            with contextlib.suppress(OSError):
                while os.read(self._wake_r, 4096):
                    pass
        with self._shared.lock:
            events, self._shared.events = self._shared.events, []
            for ev in events:
                if ev.kind == "finished" and (gone := self._shared.tries.pop(ev.ti_id, None)) is not None:
                    self._by_tid.pop(gone.tid, None)
        return events

    def remarks(self) -> list[dict[str, Any]]:
        with self._shared.lock:
            out, self._shared.remarks = self._shared.remarks, []
        return out

    def wait_handles(self) -> list[Any]:
        return [self._wake_r] if self._wake_r >= 0 else []

    def in_flight(self) -> set[int]:
        with self._shared.lock:
            return set(self._shared.tries)

    def kill(self, ti_id: int, reason: str) -> bool:
        with self._shared.lock:
            entry = self._shared.tries.get(ti_id)
            if entry is None or entry.done:
                return entry is not None
            if entry.killed is None:
                entry.killed, entry.revoked_at = reason, self._clock()
                self._shared.outbox.append(("revoke", entry))
        self._kick.set()
        return True

    # -- the threads -------------------------------------------------------------------------------
    def _send_loop(self) -> None:
        """The sender: what the job's thread left (the broker failed it, or the sender was busy) and what kill() and
        the reader queued, sent as soon as they kick it, and again every half second while the broker fails it."""
        while not self._stop.is_set():
            self._kick.wait(1.0)
            self._kick.clear()
            again = False
            with self._send_lock:
                try:
                    self._send_outbox()
                    self._fault("send", None)
                except Exception as exc:  # the broker unreachable: send again (what was not sent stays queued)
                    self._fault("send", exc)
                    again = True
                try:
                    self._revoke_queued()
                    self._fault("revoke", None)
                except Exception as exc:  # (apart from sends: a revocation that keeps failing holds no message)
                    self._fault("revoke", exc)
                    again = True
            if again:
                self._stop.wait(0.5)
                self._kick.set()

    def _send_here(self) -> bool:
        """Send the outbox from the calling thread (the job's, right after it queued the tries): one batch, while
        the broker answered the last send and the sender is idle. False: the sender is to do it (the
        job's loop does not wait on a broker that is failing: its messages wait in the outbox, as with a broker
        that cannot be reached at all)."""
        if self.send_problem is not None or not self._send_lock.acquire(blocking=False):
            return False
        try:
            self._send_outbox()
            return True
        except Exception as exc:  # (left queued: the sender sends them again, with retries)
            self._fault("send", exc)
            return False
        finally:
            self._send_lock.release()

    def _read_loop(self) -> None:
        """The reader: the tries' states as the result backend publishes them, and every FALLBACK_INTERVAL as it
        holds them; the leases and refused redeliveries every WORKER_CHECK_INTERVAL. The job is woken as soon as
        an end is read (_wake), and the reader's other work waits for a read that brought no end: it does not take
        the CPU from the job that records the ends and sends what they made ready."""
        next_poll = next_check = 0.0
        starts_since: float | None = None  # since when starts wait for the job (None: none waits)
        subscription: Any = None
        while not self._stop.is_set():
            try:
                if subscription is None:
                    subscription = self._client.pubsub(ignore_subscribe_messages=True)
                    subscription.psubscribe(self._meta_key(task_id_pattern()))
                    next_poll = 0.0  # what was published before the subscription is read now
                wait = READ_TIMEOUT if starts_since is None else STARTS_WAKE_DELAY - (time.monotonic() - starts_since)
                ends = self._take(self._published(subscription, max(0.0, wait)))
                starts_since = self._wake(ends, starts_since)
                urgent = 0
                now = time.monotonic()
                if ends and now < min(next_poll + FALLBACK_INTERVAL, next_check + WORKER_CHECK_INTERVAL):
                    continue  # the job works on the ends: the reader waits for more rather than take the CPU from it
                    # (its other work waits for a quiet moment, at most one more of its intervals)
                if now >= next_poll:  # (an end read here, one whose publication was missed, wakes the job at once too)
                    starts_since = self._wake(self._poll(), starts_since)
                    next_poll = now + FALLBACK_INTERVAL
                if now >= next_check:
                    urgent += self._check_leases() + self._read_refused() + self._resend_unclaimed()
                    next_check = now + WORKER_CHECK_INTERVAL
                if self._faults.failing:
                    self._fault("read", None)
            except Exception as exc:  # Redis unreachable: subscribe and read again (nothing is lost meanwhile)
                self._fault("read", exc)
                self._blind = True
                urgent = 0
                if subscription is not None:
                    with contextlib.suppress(Exception):
                        subscription.close()
                subscription = None
                self._stop.wait(0.5)
            starts_since = self._wake(urgent, starts_since)
            self._measure()
        if subscription is not None:
            with contextlib.suppress(Exception):
                subscription.close()

    def _wake(self, urgent: int, starts_since: float | None) -> float | None:
        """Wake the job's loop for what was read: at once for ends, lost tries and remarks (`urgent`): the job
        records them and queues what they made ready, and what ends while it works is drained by its next loop, in
        one transaction; for tries' starts alone, STARTS_WAKE_DELAY after the first of them (they free no slot, and
        the job mostly holds them for the transaction that records an end: a loop per start would be spent for
        nothing). Returns since when starts have waited (None: nothing waits)."""
        with self._shared.lock:
            starts, self._new_starts = self._new_starts, 0
        if starts and starts_since is None:
            starts_since = time.monotonic()
        if not urgent and (starts_since is None or time.monotonic() - starts_since < STARTS_WAKE_DELAY):
            return starts_since
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"!")
        return None

    def _published(self, subscription: Any, wait: float) -> list[tuple[_Try, bytes]]:
        """The states published within `wait` seconds (waiting for the first one), of the tries in flight here."""
        prefix = self._prefix_len
        out: list[tuple[_Try, bytes]] = []
        message = subscription.get_message(timeout=wait)
        while message is not None:
            channel, data = message.get("channel"), message.get("data")
            if isinstance(channel, bytes) and isinstance(data, bytes):
                with self._shared.lock:
                    entry = self._by_tid.get(channel[prefix:].decode())
                if entry is not None and not entry.done:
                    out.append((entry, data))
            message = subscription.get_message(timeout=0.0)
        return out

    def _send_outbox(self) -> None:
        """Send the messages queued to send, in order, through one producer in one round trip (kombu's
        Producer.batch: one pipeline on a Redis broker, one message at a time on brokers without batches); then
        mark the sent tries queued (one round trip). No result subscription per
        message (ignore_result: the worker stores each state itself), and a fixed argsrepr (Celery would otherwise
        format the whole work item for its logs). Nothing leaves the outbox before the batch was written: a batch
        that failed is sent again whole (a try whose message arrives twice still runs once: the claim)."""
        with self._shared.lock:
            todo = [one for one in self._shared.outbox if one[0] == "send"]
        if not todo and not self._unmarked:
            return
        sends = [entry for _kind, entry in todo]
        if sends:
            with self._app.producer_or_acquire() as producer, producer.batch():
                for entry in sends:
                    item = entry.item
                    self._app.send_task(TASK_NAME, args=[item_to_json(item)], task_id=entry.tid, queue=item.queue,
                                        retry=False, producer=producer, ignore_result=True,
                                        argsrepr=f"(try {item.try_number} of task instance {item.ti_id})",
                                        kwargsrepr="{}")
            sent_at = self._clock()
            for entry in sends:
                entry.sent, entry.sent_at = True, sent_at
            self._sent(todo)
            self._unmarked += [entry.tid for entry in sends]
        if self._unmarked:  # (marks a failed round trip left unwritten are written with the next batch's)
            pipe = self._client.pipeline(transaction=False)
            for tid in self._unmarked:
                pipe.set(queued_key(tid), "1", ex=KEEP)
            pipe.execute()
            self._unmarked = []

    def _revoke_queued(self) -> None:
        """The revocations kill() queued, in one broadcast (the sender's work only: never the job's thread's)."""
        with self._shared.lock:
            todo = [one for one in self._shared.outbox if one[0] == "revoke"]
        if todo:
            self._app.control.revoke([entry.tid for _kind, entry in todo], terminate=True, signal="SIGTERM")
            self._sent(todo)

    def _sent(self, done: list[tuple[str, Any]]) -> None:
        """`done` (entries of the outbox) taken out of it."""
        gone = {id(one) for one in done}
        with self._shared.lock:
            self._shared.outbox = collections.deque(one for one in self._shared.outbox if id(one) not in gone)

    def _poll(self) -> int:
        """One MGET of every try's state, then what _take() does with them."""
        with self._shared.lock:
            watched = [t for t in self._shared.tries.values() if t.sent and not t.done]
        if not watched:
            return 0
        raws = self._client.mget([self._meta_key(t.tid) for t in watched])
        return self._take(list(zip(watched, raws, strict=True)), logs_due=True)

    def _take(self, states: Sequence[tuple[_Try, bytes | None]], *, logs_due: bool = False) -> int:
        """Tries' states as read (each decoded only when it changed): the events of those that started or ended,
        then one round trip for the logs of the tries that ended and (logs_due) of those running whose log is
        due."""
        new: list[TaskEvent] = []
        ended: list[tuple[_Try, str, Any]] = []
        now = time.monotonic()
        logs = []
        tails: list[tuple[_Try, int, bytes]] = []  # the rest of a log that came with its try's outcome
        revoked_first: list[_Try] = []  # first seen revoked: no start known yet
        for entry, raw in states:
            if raw is None or raw == entry.seen or entry.done:
                if logs_due and entry.started and not entry.done and now >= entry.next_log:
                    logs.append(entry)
                continue
            entry.seen = raw
            meta = self._app.backend.decode_result(raw)
            status, result = meta.get("status"), meta.get("result") or {}
            if status == "FAILURE" and _worker_lost(result):
                status = "STARTED"  # its pool process died: the lease says when the try is dead (_check_leases)
            if status == "REVOKED" and not entry.started:
                revoked_first.append(entry)  # (started, and where, only once its claim says: _claimed_again)
            elif status == "STARTED" or (status in FINISHED and not entry.started):
                info = result if isinstance(result, dict) else {}
                entry.host = info.get("host") or entry.host
                if not entry.started:
                    entry.started = True
                    new.append(TaskEvent(entry.item.ti_id, entry.item.try_number, "started",
                                         float(info.get("at") or time.time()), pid=info.get("pid"), host=entry.host))
            if status in FINISHED:
                entry.done = True
                if isinstance(result, dict) and result.get("log_rewritten"):  # (its secrets masked): read it whole
                    entry.log_bytes = 0
                ended.append((entry, status, result))
                tail = log_tail(result)
                if tail is not None:
                    tails.append((entry, *tail))
                if tail is None or tail[0] != entry.log_bytes:  # (the rest of its log came with its outcome: read
                    logs.append(entry)  # only what was sent before it, if this host lacks any of it)
        urgent = self._publish(new)  # (the starts, whatever becomes of the round trips for the ends)
        try:
            ended = self._claimed_again(ended)
            # a try first seen revoked started on the worker whose claim it holds; one whose claim the executor took
            # never started anywhere, and is recorded as it ended, without a start
            urgent += self._publish([TaskEvent(entry.item.ti_id, entry.item.try_number, "started", time.time(),
                                               host=entry.host) for entry in revoked_first if entry.started])
            self._append_logs(logs)
        except Exception:  # Redis failed the claims' or the logs' round trip: the ends are taken again from the next
            for entry, _status, _result in ended:  # read of states (none is left marked done and never recorded)
                entry.done, entry.seen = False, None
            raise
        for entry, at, data in tails:
            if entry.log_bytes == at:  # (what was read above ended where the tail begins, or nothing was read)
                self._write_log(entry, data)
        return urgent + self._publish([self._finished(entry, status, result) for entry, status, result in ended])

    def _claimed_again(self, ended: list[tuple[_Try, str, Any]]) -> list[tuple[_Try, str, Any]]:
        """A try whose worker's task raised (its own machinery failed, most often Redis at its claim) is lost only
        once no delivery of its message can start it any more: the executor takes the try's claim first. Its
        message, unacknowledged when the worker's connection broke, comes back to the queue, and a worker that
        claimed it meanwhile runs the try: that one is taken as started there, and its lease decides (decision
        0257). A revoked try is judged the same way (decision 0348): revoked before a worker claimed it, it never
        ran and ends now; claimed, its pool process was killed by the revocation while the try ran or while its
        outcome was being stored, and the try's guard says which: the outcome it kept (a try whose code had ended is
        recorded as it ended, though a stop was asked for) or a dead lease."""
        raised = [(entry, status, result) for entry, status, result in ended
                  if (status == "FAILURE" and entry.killed is None) or status == "REVOKED"]
        if not raised:
            return ended
        pipe = self._client.pipeline(transaction=False)
        for entry, _status, _result in raised:
            pipe.set(claim_key(entry.tid), SCHEDULER_CLAIM, nx=True, ex=KEEP)
            pipe.get(claim_key(entry.tid))
        replies = pipe.execute()
        running = set()
        for (entry, _status, _result), took, holder in zip(raised, replies[::2], replies[1::2], strict=True):
            # (its claim already the scheduler's: taken by a round trip whose reply was lost, or before a later one
            # of the same read failed)
            # a worker claimed it: it runs there (an adopting scheduler's claim refuses every delivery: it never ran)
            if not took and holder != SCHEDULER_CLAIM.encode() and not (holder or b"").startswith(
                    ADOPTION_CLAIM.encode()):
                running.add(entry.tid)
                entry.done, entry.started = False, True
                entry.host = (holder or b"").decode(errors="replace").split(" ")[0] or entry.host
                entry.lease_seen = self._clock()
        return [one for one in ended if one[0].tid not in running]

    def _finished(self, entry: _Try, status: str, result: Any) -> TaskEvent:
        item = entry.item
        report = _report_in(result) if status == "SUCCESS" else None
        if report is not None and report.state in ENDS:
            state, reason = report.state, report.reason
            if entry.killed is not None and state in ("failed", "lost"):
                reason = entry.killed
            return TaskEvent(item.ti_id, item.try_number, "finished", report.at or time.time(), state,  # type: ignore[arg-type]
                             pid=result.get("pid"), reason=reason, host=report.host or entry.host,
                             report=report.with_log(self._log_of(entry)))
        ended: Literal["failed", "lost"] = "failed"
        if entry.killed is not None:
            reason = entry.killed
        elif status == "REVOKED":
            reason = "revoked on its worker"
        else:  # the worker's own machinery failed (the task's code fails only in the try's outcome): lost
            raised = (result.get("exc_type", "an error") if isinstance(result, dict)
                      else f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else result)
            ended, reason = "lost", f"the worker's task raised {raised}"
        return TaskEvent(item.ti_id, item.try_number, "finished", time.time(), ended, reason=reason,
                         host=entry.host, report=self._without_report(entry, ended, reason))

    def _without_report(self, entry: _Try, state: str, reason: str | None) -> TryReport:
        """What is known of a try whose report did not come back: its log as far as it reached this host."""
        return TryReport(state, reason, time.time(), entry.item.log_path, entry.host, log=self._log_of(entry))

    @staticmethod
    def _log_of(entry: _Try) -> str | None:
        """The try's log as it reached this host (None: nothing of it did): what the last read held when it read the
        log from its start (a try that ends within LOG_INTERVAL of its start: most), else the file here."""
        if not entry.log_bytes:
            return None
        if entry.whole is not None:
            return entry.whole.decode("utf-8", errors="replace")
        try:
            with open(entry.item.log_path, "rb") as log:
                return log.read(entry.log_bytes).decode("utf-8", errors="replace")
        except OSError:
            return None

    def _append_logs(self, entries: list[_Try]) -> None:
        """What the tries' logs gained since the last look (one round trip), written at their offsets into their log
        files here (a log sent whole again, masked, may be shorter than what was here: the file is cut after it)."""
        if not entries:
            return
        pipe = self._client.pipeline(transaction=False)
        for entry in entries:
            pipe.getrange(log_key(entry.tid), entry.log_bytes, -1)
        next_log = time.monotonic() + LOG_INTERVAL
        for entry, data in zip(entries, pipe.execute(raise_on_error=False), strict=True):
            entry.next_log = next_log
            if isinstance(data, bytes) and data:  # (an error reading one log holds up nothing else)
                self._write_log(entry, data)

    @staticmethod
    def _write_log(entry: _Try, data: bytes) -> None:
        """`data`, what the try's log gained, written at its offset into its log file here."""
        path = entry.item.log_path
        try:
            if not entry.log_bytes:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
            try:
                os.pwrite(fd, data, entry.log_bytes)
                os.ftruncate(fd, entry.log_bytes + len(data))
            finally:
                os.close(fd)
        except OSError:  # (this host's copy is for its readers; a log read whole is still kept from memory)
            pass
        entry.whole = data if not entry.log_bytes else None
        entry.log_bytes += len(data)

    def _check_leases(self) -> int:
        """Started tries whose lease ended are lost (decisions 0200, 0257): one their worker says is dead (a pool
        process that died, a try it fenced) at once. A lease missing once LEASE_GRACE more than its length has
        passed since this executor last saw it held is taken (its supervisor has killed a try still running by
        then, and one that comes back kills it), and the try is lost only if no outcome came OUTCOME_PATIENCE lease
        lengths later: a try that ended by itself while its worker was cut off from Redis has its outcome kept in
        the worker's outbox, delivered when the worker, or its next incarnation, reaches Redis again. Time spent
        unable to read Redis does not count: after it, every lease gets its whole length again."""
        with self._shared.lock:
            started = [t for t in self._shared.tries.values() if t.started and not t.done]
        if not started:
            return 0
        leases = self._client.mget([lease_key(t.tid) for t in started])
        now = self._clock()
        blind, self._blind = self._blind, False
        doubtful: list[tuple[_Try, Any]] = []
        for entry, lease in zip(started, leases, strict=True):
            if entry.lease_seen is None or blind:
                entry.lease_seen = now
            if lease is not None and lease == entry.lease:
                entry.lease_seen = now
                if entry.revoked_at is not None and now - entry.revoked_at >= (entry.lease_length or
                                                                               self.config.heartbeat_timeout):
                    entry.revoked_at = now  # revoked, and still renewed a lease length later: its worker missed the
                    with self._shared.lock:  # broadcast (a worker's control connection lost it): sent again
                        self._shared.outbox.append(("revoke", entry))
                    self._kick.set()
                continue
            data = json.loads(lease) if lease is not None else None
            if data is not None and "by" in data:  # (the first look at this lease)
                entry.lease, entry.lease_length, entry.lease_seen = lease, float(data.get("ms") or 0) / 1000, now
                continue
            length = entry.lease_length or self.config.heartbeat_timeout
            missing = now - entry.lease_seen
            if data is not None and "dead" in data:  # (its worker's word: lost at once)
                doubtful.append((entry, data))
            elif missing < length * (1 + LEASE_GRACE):
                continue
            elif data is None:  # taken: a supervisor that comes back kills its try; one whose try ended delivers
                self._client.set(lease_key(entry.tid), taken_value(self._unrenewed(entry)), ex=KEEP)
            elif missing >= length * (1 + LEASE_GRACE + OUTCOME_PATIENCE):  # no outcome came: it cannot come now
                doubtful.append((entry, data))
        if not doubtful:
            return 0
        states = self._client.mget([self._meta_key(entry.tid) for entry, _ in doubtful])  # (read after the leases)
        # (one whose state changed ended as its lease did: the next read of states takes its outcome)
        lost = [(entry, data) for (entry, data), state in zip(doubtful, states, strict=True)
                if state is None or state == entry.seen]
        # their logs as far as they were sent, in one round trip before any is marked done: a Redis error here
        # leaves them all to the next check, none marked done and never recorded
        self._append_logs([entry for entry, _data in lost])
        new = []
        for entry, data in lost:
            entry.done = True
            state: Literal["failed", "lost"]
            if entry.killed is not None:  # (its pool process killed by the revocation: ended as _finished ends one)
                state, reason = "failed", entry.killed
            else:
                state, reason = "lost", str(data.get("dead") or data.get("taken"))
                if self._metrics is not None:
                    self._metrics.queue_lost.labels(entry.item.queue).inc()
            new.append(TaskEvent(entry.item.ti_id, entry.item.try_number, "finished", time.time(), state,
                                 reason=reason, host=entry.host, report=self._without_report(entry, state, reason)))
        return self._publish(new)

    def _unrenewed(self, entry: _Try) -> str:
        length = entry.lease_length or self.config.heartbeat_timeout
        if entry.host is None:  # (adopted or claimed, no worker known to hold it: it may never have been sent)
            return (f"no worker held its lease within {length:g} s and a third of this scheduler taking it over (its "
                    f"message was never sent or went with Redis's data, or its worker or its link to Redis is gone)")
        return f"worker {entry.host} stopped renewing its lease ({length:g} s; the worker or its link to Redis is gone)"

    def _read_refused(self) -> int:
        """Redeliveries that workers refused: remarks for the job to record."""
        raw = self._client.lpop(REFUSED, 100)
        if not raw:
            return 0
        with self._shared.lock:
            for one in raw:
                data = json.loads(one)
                tn, host = data.get("try_number"), data.get("host")
                reason = (f"a message for try {tn} reached worker {host} after the scheduler that took the try "
                          f"over had claimed it (it found no trace of it in Redis): refused"
                          if data.get("claimed_by") == ADOPTION_CLAIM else
                          f"a redelivered message for try {tn} was refused by worker {host}: "
                          f"{data.get('claimed_by')} had started it")
                self._shared.remarks.append({"kind": "try_redelivery_refused", "ti_id": data.get("ti_id"),
                                             "try_number": tn, "host": host, "reason": reason,
                                             "celery_task_id": data.get("task_id")})
        return len(raw)

    def _resend_unclaimed(self) -> int:
        """The tries no worker claimed within the queued timeout: their messages sent again, with a remark each. A try
        a worker did claim, though it never said it started (its worker died in between, or Redis lost its state), is
        taken as started on the claimer instead: its lease says what became of it (_check_leases), and a message sent
        again would only be refused by the claim, or run the same try twice once the claim is gone. So is a try
        that has a lease though its claim is gone (Redis lost its data; the supervisor put the lease back), and one
        a scheduler that took it over claimed (ADOPTION_CLAIM); a start is said only of a try whose worker is
        known."""
        with self._shared.lock:
            late = unclaimed(self._shared.tries.values(), self._clock(), self.config.queued_timeout)
        if not late:
            return 0
        tids = [entry.tid for entry in late]
        pipe = self._client.pipeline(transaction=False)
        pipe.mget([claim_key(tid) for tid in tids])
        pipe.mget([lease_key(tid) for tid in tids])
        claims, leases = pipe.execute()
        taken: list[tuple[_Try, str | None]] = []
        resend: list[_Try] = []
        for entry, claim, lease in zip(late, claims, leases, strict=True):
            if claim:
                holder = claim.decode(errors="replace").split(" ")[0]
                taken.append((entry, None if holder == ADOPTION_CLAIM else holder))
            elif lease:  # (held, or said dead or taken: the lease decides)
                by = json.loads(lease).get("by")
                taken.append((entry, str(by).split(" ")[0] if by else None))
            else:
                resend.append(entry)
        with self._shared.lock:
            for entry, host in taken:
                entry.started, entry.host, entry.lease_seen = True, host, self._clock()
            for entry in resend:
                entry.sent_at = None  # (sent again: the sender sets it anew)
                self._shared.outbox.append(("send", entry))
                self._shared.remarks.append({
                    "kind": "try_resent", "ti_id": entry.item.ti_id, "try_number": entry.item.try_number,
                    "queue": entry.item.queue,
                    "reason": f"no worker claimed try {entry.item.try_number} within "
                              f"{self.config.queued_timeout:g} s of its message being sent "
                              f"(queue {entry.item.queue!r}): its message is sent again"})
        if resend:
            self._kick.set()
        return len(resend) + self._publish([TaskEvent(entry.item.ti_id, entry.item.try_number, "started",
                                                      time.time(), host=host) for entry, host in taken if host])

    def _measure(self) -> None:
        """The per-queue gauges: tries sent and not started, tries running."""
        if self._metrics is None:
            return
        queued: dict[str, int] = dict.fromkeys(self._queues, 0)
        running = dict(queued)
        with self._shared.lock:
            for entry in self._shared.tries.values():
                if not entry.done:
                    counts = running if entry.started else queued
                    counts[entry.item.queue] = counts.get(entry.item.queue, 0) + 1
        for queue in queued.keys() | running.keys():
            self._queues.add(queue)
            self._metrics.queue_queued.labels(queue).set(queued.get(queue, 0))
            self._metrics.queue_running.labels(queue).set(running.get(queue, 0))

    def _publish(self, new: list[TaskEvent]) -> int:
        """Hand events to drain(); returns how many are not starts (see _wake)."""
        if not new:
            return 0
        starts = sum(1 for ev in new if ev.kind == "started")
        with self._shared.lock:
            self._shared.events.extend(new)
            self._new_starts += starts
        return len(new) - starts


def _report_in(result: Any) -> TryReport | None:
    """The try report a worker's result carries (scheduler/runtime/try_report.py); one of another version is a
    lost try that says so. None: the result holds no report (the worker's task failed)."""
    if not isinstance(result, dict) or "report" not in result:
        return None
    try:
        return TryReport.from_json(result["report"])
    except ReportRefused as exc:
        return TryReport("lost", f"its worker's report was refused: {exc}", float(result.get("at") or 0.0),
                         host=result.get("host"))


def log_tail(result: Any) -> tuple[int, bytes] | None:
    """(offset, bytes): the rest of a try's log its worker sent with its outcome (decision 0316); None: none came."""
    tail = result.get("log_tail") if isinstance(result, dict) else None
    if not (isinstance(tail, list) and len(tail) == 2 and isinstance(tail[0], int) and isinstance(tail[1], str)):
        return None
    try:
        return tail[0], base64.b64decode(tail[1], validate=True)
    except ValueError:
        return None


def _worker_lost(result: Any) -> bool:
    """Is this failure Celery's WorkerLostError (the pool process running the try died)?"""
    if isinstance(result, dict):
        return result.get("exc_type") == "WorkerLostError"
    return type(result).__name__ == "WorkerLostError"


def unclaimed(tries: Iterable[_Try], now: float, timeout: float) -> list[_Try]:
    """The tries sent at least `timeout` seconds before `now` that no worker reported started, and that are neither
    ended nor being stopped: a worker that took the message died before claiming it, or none serves its queue."""
    return [t for t in tries if t.sent and t.sent_at is not None and not t.started and not t.done
            and t.killed is None and now - t.sent_at >= timeout]
