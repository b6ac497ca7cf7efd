"""OpenLineage: every try of the ledger as an OpenLineage run (decision 0287, docs/openlineage.md).

A relay in the scheduler's process follows the tries the ledger recorded (the task_try table, by id) with its own
read-only sessions, and turns each try's start and end into a START and a COMPLETE, FAIL or ABORT event; a second
thread sends them through the official client (`openlineage-python`, the `ledger[openlineage]` extra), configured
as the client configures itself (OPENLINEAGE_URL, OPENLINEAGE_CONFIG, openlineage.yml, OPENLINEAGE__*). Between the
two, a bounded queue: a backend that is down or slow costs the loop nothing and a try nothing; what cannot be sent
is dropped, counted (`ledger_openlineage_events_dropped_total{reason}`) and said in one line when sending starts
failing and one when it works again. Where the relay has got to (the last try id seen, the tries it watches) is
kept in LEDGER_HOME/openlineage-relay.json, so that a restarted scheduler goes on from there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.orm import Session, sessionmaker

from ledger import __version__
from ledger.core.errors import InvalidInput
from ledger.core.openlineage_ids import run_uuid
from ledger.infra import settings
from ledger.store import openlineage as store

PRODUCER = f"urn:ledger:{__version__}"
FACET_NAME = "ledger"
FACET_SCHEMA_URL = "urn:ledger:openlineage:LedgerRunFacet:1-0-0"  # its schema: openlineage_facet.schema.json
FACET_SCHEMA_FILE = Path(__file__).with_name("openlineage_facet.schema.json")

# a try's recorded end state -> the OpenLineage event type of its end
END_TYPES: Mapping[str, str] = {
    "success": "COMPLETE", "skipped": "COMPLETE", "up_for_reschedule": "COMPLETE",
    "failed": "FAIL",
    "lost": "ABORT", "stopped": "ABORT",
}
_NOT_ENDED = frozenset({"queued", "running", "scheduled"})
_GAP_POLLS = 60  # polls a missing try id below the keyset is looked for (a transaction that commits late)
_GAP_SPAN = 1000  # ... and at most this many ids below each try read (a sequence that jumped is no transaction)


def configured(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> bool:
    """Whether the OpenLineage client has a configuration of its own to send with (and is not disabled)."""
    env = os.environ if env is None else env
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OPENLINEAGE_URL") or env.get("OPENLINEAGE_CONFIG"):
        return True
    if any(k.startswith("OPENLINEAGE__TRANSPORT") for k in env):
        return True
    places = ((cwd or Path.cwd()) / "openlineage.yml", Path("~/.openlineage/openlineage.yml").expanduser())
    return any(p.is_file() for p in places)


def _iso(at: datetime) -> str:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).isoformat().replace("+00:00", "Z")


def dataset_name(uri: str, namespace: str) -> tuple[str, str]:
    """(namespace, name) of a dataset named by `uri`: `scheme://authority` and the path of a URI, else the job's
    namespace and the name as it is."""
    if "://" in uri:
        parts = urlsplit(uri)
        return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/") or "/"
    return namespace, uri


def ledger_facet(f: store.TryFacts, namespace: str, *, start: bool = False) -> dict[str, Any]:
    """ledger's own facts of a try, as the `ledger` run facet holds them (openlineage_facet.schema.json). `start`:
    of its START event, whose `tryState` is `running` (the state it reports), whenever the relay first saw it."""
    def run_ref(run_id: int | None) -> dict[str, Any] | None:
        return None if run_id is None else {"runId": str(run_id),
                                            "openlineageRunId": run_uuid(namespace, f.dag_id, run_id)}
    return {
        "dagId": f.dag_id, "taskId": f.task_id, "mapIndex": f.map_index, "tryNumber": f.row.try_number,
        "tryState": "running" if start else f.row.state, "hostname": f.row.hostname,
        "dagRun": {"runId": str(f.run_id), "runType": f.run_type, "logicalDate": _iso(f.logical_date),
                   "backfillId": None if f.backfill_id is None else str(f.backfill_id)},
        "previous": run_ref(f.previous_run_id),
        "overrode": [run_ref(r) for r in f.overrode],
        "overriddenBy": run_ref(f.overridden_by),
        "versionHash": f.version_hash, "codeSnapshot": f.code_snapshot,
        "partitionsWritten": [{k: w[k] for k in ("dataset", "partition", "alias", "event_id", "rows", "path")
                               if w.get(k) is not None} for w in f.written],
        "inletsRead": [{k: r[k] for k in ("dataset", "partition", "event_id", "source_dag_id", "source_run_id")
                        if r.get(k) is not None} for r in f.read],
    }


def build_event(f: store.TryFacts, event_type: str, namespace: str) -> Any:
    """The OpenLineage RunEvent of a try's start (START) or end, in the client's typed model."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import RunFacet, job_type_job, nominal_time_run, parent_run

    facet = _facet_class(RunFacet)(**ledger_facet(f, namespace, start=event_type == "START"), producer=PRODUCER)
    at = f.row.started_at if event_type == "START" else (f.row.ended_at or f.row.started_at)
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_uuid(namespace, f.dag_id, f.run_id)),
        job=parent_run.Job(namespace=namespace, name=f.dag_id),
        root=parent_run.Root(run=parent_run.RootRun(runId=run_uuid(namespace, f.dag_id, f.run_id)),
                             job=parent_run.RootJob(namespace=namespace, name=f.dag_id)), producer=PRODUCER)
    run_facets: dict[str, Any] = {
        "parent": parent, FACET_NAME: facet,
        "nominalTime": nominal_time_run.NominalTimeRunFacet(nominalStartTime=_iso(f.data_interval[0]),
                                                            nominalEndTime=_iso(f.data_interval[1]),
                                                            producer=PRODUCER)}
    job_facets: dict[str, Any] = {"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="LEDGER",
                                                          jobType="TASK", producer=PRODUCER)}
    inputs, outputs = _datasets(f, namespace)
    return RunEvent(eventType=RunState[event_type], eventTime=_iso(at or datetime.now(UTC)), producer=PRODUCER,
                    run=Run(runId=run_uuid(namespace, f.dag_id, f.run_id, f.task_id, f.map_index, f.row.try_number),
                            facets=run_facets),
                    job=Job(namespace=namespace, name=f"{f.dag_id}.{f.task_id}", facets=job_facets),
                    inputs=[InputDataset(namespace=ns, name=n) for ns, n in inputs],
                    outputs=[OutputDataset(namespace=ns, name=n) for ns, n in outputs])


def _datasets(f: store.TryFacts, namespace: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The try's inputs (its inlets, and what it was given of them) and outputs (its outlets, and what it wrote),
    each dataset once, in the order met."""
    def uri_of(d: Mapping[str, Any]) -> str | None:
        value = d.get("uri") or d.get("dataset")
        return str(value) if value else None
    inputs = [uri_of(d) for d in f.inlets] + [r.get("dataset") for r in f.read]
    outputs = [uri_of(d) for d in f.outlets] + [w.get("dataset") for w in f.written]
    return ([dataset_name(u, namespace) for u in dict.fromkeys(i for i in inputs if i)],
            [dataset_name(u, namespace) for u in dict.fromkeys(o for o in outputs if o)])


_FACET_CLASS: Any = None


def _facet_class(base: Any) -> Any:
    """The `ledger` run facet's class: a RunFacet of the client's model, with its own schema URL."""
    global _FACET_CLASS
    if _FACET_CLASS is None:
        import attr

        @attr.define(kw_only=True)
        class LedgerRunFacet(base):  # type: ignore[misc]
            dagId: str
            taskId: str
            mapIndex: int
            tryNumber: int
            tryState: str
            hostname: str | None
            dagRun: dict[str, Any]
            previous: dict[str, Any] | None
            overrode: list[dict[str, Any]]
            overriddenBy: dict[str, Any] | None
            versionHash: str
            codeSnapshot: str | None
            partitionsWritten: list[dict[str, Any]]
            inletsRead: list[dict[str, Any]]

            @staticmethod
            def _get_schema() -> str:
                return FACET_SCHEMA_URL

        _FACET_CLASS = LedgerRunFacet
    return _FACET_CLASS


# -- where the relay has got to ---------------------------------------------------------------------------------

@dataclass
class RelayState:
    """The keyset (the newest try id seen), the tries seen but not ended (id -> "queued" or "started"), and the
    ids below the keyset not seen yet (id -> polls left): on PostgreSQL a transaction that took a lower id can
    commit after one that took a higher one."""

    cursor: int | None = None
    watching: dict[int, str] = field(default_factory=dict)
    gaps: dict[int, int] = field(default_factory=dict)
    _saved: str = field(default="", compare=False, repr=False)

    @classmethod
    def load(cls, path: Path) -> RelayState:
        try:
            data = json.loads(path.read_text())
            return cls(int(data["cursor"]), {int(k): str(v) for k, v in data.get("watching", {}).items()},
                       {int(k): int(v) for k, v in data.get("gaps", {}).items()})
        except (OSError, ValueError, KeyError, TypeError):
            return cls()

    def save(self, path: Path) -> None:
        """Written when it changed since the last save (a new file, then renamed over the old one)."""
        text = json.dumps({"cursor": self.cursor, "watching": self.watching, "gaps": self.gaps})
        if text == self._saved:
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        self._saved = text


class RelayCounters:
    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge

        self.sent = Counter("ledger_openlineage_events_sent", "OpenLineage events the backend accepted",
                            ["event_type"], registry=registry)
        self.dropped = Counter("ledger_openlineage_events_dropped", "OpenLineage events dropped, by why: queue_full "
                               "(the backend was too slow), send_failed, shutdown (left queued at stop)",
                               ["reason"], registry=registry)
        self.queued = Gauge("ledger_openlineage_queue_depth", "OpenLineage events waiting to be sent",
                            registry=registry)


_STOP = object()


class LineageRelay:
    """The relay (a thread reading what was recorded) and the sender (a thread emitting through the client)."""

    def __init__(self, sessions: sessionmaker[Session], state_path: Path, counters: RelayCounters,
                 say: Callable[[str], None], *, client: Any, namespace: str, queue_size: int,
                 poll_interval: float, drain_timeout: float) -> None:
        self.sessions, self.state_path, self.counters, self.say = sessions, state_path, counters, say
        self.client, self.namespace = client, namespace
        self.poll_interval, self.drain_timeout = poll_interval, drain_timeout
        self.events: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self.state = RelayState.load(state_path)
        self._stop = threading.Event()
        self._failing: str | None = None  # the error sending fails with, while it fails
        self._dropped_while_failing = 0
        self._reading_fails: str | None = None
        self._abandoned = False  # the stop's drain_timeout passed: the sender sends nothing more
        self._in_flight = False  # the sender is sending an event
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._relay, name="openlineage-relay", daemon=True),
                         threading.Thread(target=self._send, name="openlineage-sender", daemon=True)]

    def start(self) -> None:
        """Start both threads; on the first start ever, the keyset is set first (the newest try recorded), so that
        every try the scheduler starts from now on is sent."""
        if self.state.cursor is None:
            with self.sessions() as session:
                self.state.cursor = store.newest_try_id(session)
            self.state.save(self.state_path)
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Read what was recorded once more, then give the sender drain_timeout to send what is queued; what is
        left is dropped (counted). Says what was sent and dropped."""
        self._stop.set()
        self._threads[0].join()
        deadline = time.monotonic() + self.drain_timeout
        with contextlib.suppress(queue.Full):
            self.events.put(_STOP, timeout=self.drain_timeout)
        self._threads[1].join(max(0.0, deadline - time.monotonic()))
        with self._lock:  # what is still queued or being sent now is dropped, counted once
            self._abandoned = True
            left = int(self._in_flight)
        with contextlib.suppress(queue.Empty):
            while True:
                if self.events.get_nowait() is not _STOP:
                    left += 1
        if left:
            self.counters.dropped.labels("shutdown").inc(left)
        sent = sum(int(s.value) for m in self.counters.sent.collect() for s in m.samples
                   if s.name.endswith("_total"))
        dropped = sum(int(s.value) for m in self.counters.dropped.collect() for s in m.samples
                      if s.name.endswith("_total"))
        self.say(f"openlineage: {sent} event(s) sent, {dropped} dropped")

    # -- the relay ----------------------------------------------------------------------------------------------

    def _relay(self) -> None:
        while True:
            stopping = self._stop.wait(self.poll_interval)
            try:
                self.poll()
                if self._reading_fails is not None:
                    self._reading_fails = None
                    self.say("openlineage: reading the recorded tries works again")
            except Exception as exc:  # a database fault: said once, and the next poll reads again
                text = f"{type(exc).__name__}: {exc}".splitlines()[0]
                if self._reading_fails is None:
                    self.say(f"openlineage: cannot read the recorded tries ({text}); trying again")
                self._reading_fails = text
            if stopping:
                return

    def poll(self) -> int:
        """Read the tries recorded since the last poll and the ones watched; queue their events. Returns how
        many events were queued."""
        s = self.state
        assert s.cursor is not None  # (set by start)
        with self.sessions() as session:  # read only: closed, never committed
            new = store.tries_after(session, s.cursor, 1000)
            known = store.tries_by_id(session, list(s.watching) + list(s.gaps))
            rows, emits = self._plan(new, known)
            facts = {f.row.id: f for f in store.facts_of(session, rows)}
        count = 0
        for try_id, event_type in emits:
            f = facts.get(try_id)
            if f is not None:
                self.offer(build_event(f, event_type, self.namespace))
                count += 1
        s.save(self.state_path)
        return count

    def _plan(self, new: list[store.TryRow], known: list[store.TryRow]
              ) -> tuple[list[store.TryRow], list[tuple[int, str]]]:
        """What to emit of the tries read (and what the state becomes): (the rows to read facts of, (try id,
        event type) in order)."""
        s = self.state
        assert s.cursor is not None
        found = {r.id for r in known}
        for gone in [i for i in s.watching if i not in found]:  # (a try row that is no more)
            del s.watching[gone]
        for i in [i for i in s.gaps if i not in found]:
            s.gaps[i] -= 1
            if s.gaps[i] <= 0:
                del s.gaps[i]
        for row in new:  # ids skipped over: looked for again for a while
            s.gaps.update((i, _GAP_POLLS) for i in range(max(s.cursor + 1, row.id - _GAP_SPAN), row.id)
                          if i not in s.gaps)
            s.cursor = row.id
        rows, emits = [], []
        for row in sorted(known, key=lambda r: r.id) + new:
            phase = s.watching.pop(row.id, None)
            s.gaps.pop(row.id, None)
            started = row.started_at is not None
            ended = row.state not in _NOT_ENDED
            out = []
            if started and phase != "started":
                out.append("START")
            if ended:
                out.append(END_TYPES.get(row.state, "ABORT"))
            else:
                s.watching[row.id] = "started" if started else "queued"
            if out:
                rows.append(row)
                emits += [(row.id, t) for t in out]
        return rows, emits

    # -- the sender ---------------------------------------------------------------------------------------------

    def offer(self, item: Any, *, count: bool = True, block: bool = False) -> None:
        try:
            self.events.put(item, block=block)
        except queue.Full:
            self.counters.dropped.labels("queue_full").inc()
            self._note_drop("queue_full", "the queue is full (the OpenLineage backend is slower than the tries)")
            return
        if count:
            self.counters.queued.inc()

    def _send(self) -> None:
        while True:
            item = self.events.get()
            with self._lock:
                if item is _STOP or self._abandoned:
                    return
                self._in_flight = True
            self.counters.queued.dec()
            try:
                self.client.emit(item)
                error = None
            except Exception as exc:  # whatever the transport raises: the event is dropped, the try unharmed
                error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            with self._lock:
                self._in_flight = False
                if self._abandoned:  # (counted by the stop)
                    return
            if error is not None:
                self.counters.dropped.labels("send_failed").inc()
                self._note_drop("send_failed", error)
                continue
            self.counters.sent.labels(str(getattr(item.eventType, "value", item.eventType))).inc()
            if self._failing is not None:
                dropped, self._failing, self._dropped_while_failing = self._dropped_while_failing, None, 0
                self.say(f"openlineage: sending events works again ({dropped} dropped meanwhile)")

    def _note_drop(self, reason: str, text: str) -> None:
        """One line when events start being dropped (the relay's queue_full, the sender's send_failed), none for
        the drops after it until sending works again."""
        with self._lock:
            self._dropped_while_failing += 1
            first, self._failing = self._failing is None, self._failing or reason
        if first:
            self.say(f"openlineage: cannot send events ({text}); dropping them until it works again")


@contextlib.contextmanager
def relay(sessions: sessionmaker[Session], home: Path, registry: Any, say: Callable[[str], None]) -> Iterator[None]:
    """Relay the tries to OpenLineage while the block runs, when the client is configured (nothing otherwise).
    One relay per LEDGER_HOME: another scheduler of the same home sends none (a lock file says which)."""
    if not configured():
        yield
        return
    try:
        from openlineage.client import OpenLineageClient
    except ImportError:
        say("openlineage: OPENLINEAGE_* is set but openlineage-python is not installed "
            "(pip install 'ledger[openlineage]'); sending no lineage")
        yield
        return
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "openlineage-relay.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            say("openlineage: another scheduler of this LEDGER_HOME relays the tries; this one sends none")
            yield
            return
        namespace = os.environ.get("OPENLINEAGE_NAMESPACE") or "default"
        quiet = logging.NullHandler()  # the client's own complaint, when nothing else handles it, is not shown
        logging.getLogger("openlineage").addHandler(quiet)  # (the line below says it)
        try:
            client = OpenLineageClient()
        except Exception as exc:  # a transport the configuration names that cannot be made
            raise InvalidInput(f"the OpenLineage client's configuration is not usable: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        finally:
            logging.getLogger("openlineage").removeHandler(quiet)
        r = LineageRelay(sessions, home / "openlineage-relay.json", RelayCounters(registry), say, client=client,
                         namespace=namespace, queue_size=int(settings.value("LEDGER_OPENLINEAGE_QUEUE_SIZE") or 10000),
                         poll_interval=float(settings.value("LEDGER_OPENLINEAGE_POLL_INTERVAL") or 1.0),
                         drain_timeout=float(_setting_or("LEDGER_OPENLINEAGE_DRAIN_TIMEOUT", 5.0)))
        say(f"openlineage: relaying tries to {_where(client)} (namespace {namespace})")
        r.start()
        try:
            yield
        finally:
            r.stop()


def _setting_or(name: str, default: float) -> float:
    found = settings.value(name)
    return default if found is None else float(found)


def _where(client: Any) -> str:
    transport = getattr(client, "transport", None)
    url = getattr(transport, "url", None)
    return f"{url}" if url else type(transport).__name__
