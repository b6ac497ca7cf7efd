"""The hash chains of the events (decision 0260): the canonical form of an event, its hash, and the checks that
find where a chain or the rows it reports were changed. Pure: rows come in as plain values, breaks go out as
plain values; reading them is ledger/store/audit.py's, the code's own hashes ledger/services/audit.py's.

An event's hash is the sha256 of the UTF-8 text

    <previous event's hash of its chain> "\\n" <canonical JSON of covers> "\\n" <canonical JSON of the body>

where the body is {"actor", "at", "dag_id", "details", "kind", "run_id"} (`at` as 2024-03-10T12:00:00.000000Z)
and `covers` is what the event's transaction left of the rows it reports: {"run": RUN} for an event about a run
(RUN: {"id", "state", "previous", "version", "code"}: the run's state, previous run, version hash and the key of
that version's code snapshot; once its task instances are settled (tasks_recorded: a finished run's all finished,
an overridden run's none in flight) also "tries", "try_rows" and "writes", the digests of its task instances' last
tries and outcomes, of its tries' rows (number, state, the version each ran) and of its lineage writes),
{"runs": {id: RUN}} for the genesis event of a chain (the runs as they were when verified history began), null
otherwise. Canonical JSON: keys sorted, no spaces, not ASCII-escaped. The first event of a chain follows ZERO.

The facts of a run's row that no cover holds (its logical date and data interval, its type and backfill, its
conf, the run that overrode it) are checked against the events that state them (decision 0353): `run_created`,
`run_overridden`, `run_restored` (recorded_facts, fact_breaks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.core.states import ACTIVE_TASK_STATES, FINISHED_RUN_STATES, FINISHED_TASK_STATES, RunState
from ledger.core.versions import canonical_json

ZERO = "0" * 64
"""What the first event of a chain follows."""
FINISHED_TASKS = frozenset(state.value for state in FINISHED_TASK_STATES)
IN_FLIGHT_TASKS = frozenset(state.value for state in ACTIVE_TASK_STATES)
FINISHED_RUNS = frozenset(state.value for state in FINISHED_RUN_STATES)
OVERRIDDEN = RunState.OVERRIDDEN.value
GLOBAL_CHAIN = ""
"""The chain of the events with no DAG (users, pools, variables...)."""
GENESIS = "audit_started"
"""The event that says where a chain's verified history begins (written by the migration that made the chains)."""
STOPPED = "audit_stopped"
"""The event a downgrade below the chains writes in each chain it drops: the head the chain had (decision 0359)."""


def chain_of(dag_id: str | None) -> str:
    return GLOBAL_CHAIN if dag_id is None else dag_id


def chain_name(chain: str) -> str:
    return "(no DAG)" if chain == GLOBAL_CHAIN else chain


def timestamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def body_json(at: datetime | str, kind: str, actor: str, dag_id: str | None, run_id: int | None,
              details: Any) -> str:
    """The canonical JSON of an event's own fields (what its row says, apart from the chain's columns)."""
    return canonical_json({"at": at if isinstance(at, str) else timestamp(at), "kind": kind, "actor": actor,
                           "dag_id": dag_id, "run_id": run_id, "details": details})


def event_hash(prev: str, covers: Any, body: str) -> str:
    return hashlib.sha256(f"{prev}\n{canonical_json(covers)}\n{body}".encode()).hexdigest()


def run_cover(run_id: int, state: str, previous: int | None, version: str, code: str | None,
              tries: str | None = None, try_rows: str | None = None, writes: str | None = None) -> dict[str, Any]:
    """What an event records of the run it reports; with `tries` (tries_digest), `try_rows` and `writes`
    (rows_digest) when its task instances are recorded too (tasks_recorded)."""
    cover: dict[str, Any] = {"id": run_id, "state": state, "previous": previous, "version": version, "code": code}
    for key, digest in (("tries", tries), ("try_rows", try_rows), ("writes", writes)):
        if digest is not None:
            cover[key] = digest
    return cover


TaskRow = tuple[str, int, int, str]
"""A task instance as the chain covers it: (task_id, map_index, try_number, state): its last try and its outcome."""
TryRow = tuple[str, int, int, str, str | None]
"""A try as the chain covers it: (task_id, map_index, try_number, state, dag_version): the version whose code it
ran."""
WriteRow = tuple[str, int, str, str, str, str, int | None, str | None]
"""A lineage write as the chain covers it: (task_id, try_number, dataset, partition, dag_version, try_state, rows,
path)."""


def tasks_recorded(run_state: str, task_states: Iterable[str]) -> bool:
    """Whether an event about a run in `run_state` records its task instances, tries and lineage writes: once
    nothing but an action that writes an event about the run (a clear, a mark, a restore) can change them again.
    A finished run (success, failed) whose task instances have all finished; an overridden run (history a backfill
    or a cancel rewrote: no job holds it, nothing schedules it) whose task instances have no try in flight."""
    if run_state in FINISHED_RUNS:
        return all(s in FINISHED_TASKS for s in task_states)
    if run_state == OVERRIDDEN:
        return not any(s in IN_FLIGHT_TASKS for s in task_states)
    return False


def tries_digest(rows: Iterable[TaskRow], *, only_finished: bool = True) -> str | None:
    """The sha256 of the canonical JSON of a run's task instances (sorted [task_id, map_index, try_number, state]
    lists). `only_finished`: None when some has not finished (what an event of a finished run records)."""
    listed = sorted([str(t), int(m), int(n), str(s)] for t, m, n, s in rows)
    if only_finished and any(s not in FINISHED_TASKS for _t, _m, _n, s in listed):
        return None
    return hashlib.sha256(canonical_json(listed).encode()).hexdigest()


def rows_digest(rows: Iterable[Sequence[Any]]) -> str:
    """The sha256 of the canonical JSON of a list of rows (each a list of strings, integers and nulls, a column
    of one kind), sorted by their values column by column, a null after any value: `try_rows` (TryRow) and
    `writes` (WriteRow) of a run cover."""
    listed = sorted((list(r) for r in rows), key=lambda r: [(v is None, v) for v in r])
    return hashlib.sha256(canonical_json(listed).encode()).hexdigest()


def conf_digest(conf: Any) -> str | None:
    """The sha256 of the canonical JSON of a run's conf (None: it has none), as its `run_created` event states it."""
    return None if conf is None else hashlib.sha256(canonical_json(conf).encode()).hexdigest()


@dataclass(frozen=True)
class ChainedEvent:
    """An event row as the verifier reads it."""

    id: int
    seq: int | None
    at: str  # timestamp()
    kind: str
    actor: str
    dag_id: str | None
    run_id: int | None
    details: Any
    covers: Any
    prev_hash: str | None
    hash: str | None

    def recomputed(self) -> str:
        return event_hash(self.prev_hash or "", self.covers,
                          body_json(self.at, self.kind, self.actor, self.dag_id, self.run_id, self.details))

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "at": self.at, "kind": self.kind, "actor": self.actor,
                "dag_id": self.dag_id, "run_id": self.run_id, "details": self.details, "covers": self.covers,
                "prev_hash": self.prev_hash, "hash": self.hash}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> ChainedEvent:
        return cls(int(row["id"]), row.get("seq"), str(row["at"]), str(row["kind"]), str(row["actor"]),
                   row.get("dag_id"), row.get("run_id"), row.get("details"), row.get("covers"),
                   row.get("prev_hash"), row.get("hash"))


@dataclass(frozen=True)
class Head:
    """A chain's head row: the hash of its last event, that event's id and the chain's length."""

    hash: str
    id: int | None
    length: int


@dataclass(frozen=True)
class Break:
    """One thing that does not verify: `what` is one line that names it."""

    chain: str
    what: str

    def line(self) -> str:
        return f"{chain_name(self.chain)}: {self.what}"


def _about(e: ChainedEvent, stubs: frozenset[int] = frozenset()) -> str:
    return f"event {e.id} ({'given by its hash only' if e.id in stubs else e.kind})"


def chain_breaks(chain: str, events: Sequence[ChainedEvent], head: Head | None, *, whole: bool = True,
                 stubs: frozenset[int] = frozenset()) -> list[Break]:
    """The first break of one chain, its events in chain order (seq): an event whose content no longer gives its
    hash (edited), one with no hash (written outside ledger), one that does not follow the one before it (one
    deleted between them, one inserted, or two out of order: it follows one that comes after it), a chain that
    does not end at its head. `whole`: the events start at the chain's beginning (else at --since: the first
    one's link is taken as it is). `stubs`: ids of events given by their hashes only (an export's events outside
    its range): their links are checked, not their content."""
    previous: ChainedEvent | None = None
    seen: dict[str, ChainedEvent] = {}
    place_of = {e.hash: place for place, e in enumerate(events) if e.hash is not None}
    for place, e in enumerate(events):
        about = _about(e, stubs)
        if e.hash is None or e.prev_hash is None:
            return [Break(chain, f"{about} has no hash: it was written outside ledger")]
        if e.id not in stubs and e.recomputed() != e.hash:
            return [Break(chain, f"{about} was edited: its content no longer gives its hash")]
        expected = previous.hash if previous is not None else (ZERO if whole else e.prev_hash)
        if e.prev_hash != expected:
            after = f"event {previous.id}" if previous is not None else "the chain's start"
            if e.prev_hash in seen:
                other = seen[e.prev_hash]
                return [Break(chain, f"{about} follows event {other.id}, not {after}: an event was inserted "
                                     "before it")]
            if place_of.get(e.prev_hash, -1) > place:
                ahead = events[place_of[e.prev_hash]]
                return [Break(chain, f"{about} follows event {ahead.id}, which comes after it (seq {ahead.seq}), "
                                     f"not {after}: the events are out of order")]
            return [Break(chain, f"{about} does not follow {after}: the event between them was deleted")]
        assert e.hash is not None
        seen[e.hash] = e
        previous = e
    if head is None:
        if previous is not None:
            return [Break(chain, f"the chain has events (the last {previous.id}) but no head: its head was deleted")]
        return []
    if previous is None:
        if head.length:
            return [Break(chain, f"its head is event {head.id} but the chain has no events: they were deleted")]
        return []
    if previous.hash != head.hash:
        if previous.id == head.id or (head.id is not None and previous.id < head.id):
            return [Break(chain, f"the chain ends at event {previous.id} but its head is event {head.id}: "
                                 "events at its end were deleted")]
        return [Break(chain, f"event {previous.id} is past the chain's head (event {head.id}): it was inserted")]
    if head.id is not None and previous.id != head.id:
        return [Break(chain, f"the chain ends at event {previous.id} but its head names event {head.id}: the "
                             "event's id was changed")]
    if whole and len(events) != head.length:
        return [Break(chain, f"the chain has {len(events)} events but its head counts {head.length}")]
    return []


def id_order_breaks(chain: str, events: Sequence[ChainedEvent]) -> list[Break]:
    """The first event of a chain (its events in chain order) whose id is not above the id of the one before it.
    Where writers take turns (SQLite: a writing transaction holds the database's lock from its start), ids grow
    with places; the hashes do not cover ids, and `ledger events` lists and cites events by id (decision 0359)."""
    previous: ChainedEvent | None = None
    for e in events:
        if e.seq is None:
            break
        if previous is not None and e.id <= previous.id:
            return [Break(chain, f"{_about(e)} comes after event {previous.id} in the chain (seq {previous.seq}, "
                                 f"then {e.seq}) but has a lower id: the events' ids were changed")]
        previous = e
    return []


def restart_notice(chain: str, events: Sequence[ChainedEvent]) -> Break | None:
    """One line when verified history of the chain (its events in chain order) begins after events that were
    chained as found, unchecked: at its last genesis event, unless that is the chain's first (decision 0359). It
    names what shows the chain was dropped before: the `audit_stopped` event of a downgrade, or an earlier
    genesis event."""
    starts = [e for e in events if e.kind == GENESIS and e.seq is not None]
    if not starts or starts[-1].seq == 1:
        return None
    start, place = starts[-1], starts[-1].seq or 0
    what = (f"chain restarted at event {start.id} ({GENESIS}): history before it was not verified "
            f"({place - 1} event(s))")
    stops = [e for e in events if e.kind == STOPPED and e.seq is not None and e.seq < place]
    if stops:
        what += f"; `ledger db downgrade` dropped the chain at event {stops[-1].id} ({STOPPED})"
    elif len(starts) > 1:
        what += f"; it had started before, at event {starts[-2].id}"
    return Break(chain, what)


def last_covers(events: Iterable[ChainedEvent]) -> dict[int, tuple[int, dict[str, Any] | None]]:
    """For each run, the last event about it (in chain order) and what it recorded of the run: a genesis event's
    snapshot, then each event with covers {"run": ...}."""
    found: dict[int, tuple[int, dict[str, Any] | None]] = {}
    for e in events:
        covers = e.covers if isinstance(e.covers, dict) else {}
        if e.kind == GENESIS and isinstance(covers.get("runs"), dict):
            found.update({int(k): (e.id, v) for k, v in covers["runs"].items()})
        elif e.run_id is not None and "run" in covers:
            found[e.run_id] = (e.id, covers["run"])
    return found


_COVERED = {"tries": "its task instances' tries or outcomes", "try_rows": "its tries' states or versions",
            "writes": "its lineage writes"}


def run_breaks(chain: str, recorded: Mapping[int, tuple[int, dict[str, Any] | None]],
               runs: Mapping[int, dict[str, Any]]) -> list[Break]:
    """Each run whose row (`runs`: run id -> run_cover of the row now, with every digest) is not what the last
    event about it recorded (last_covers), that no event reports, or that an event reports and that is gone. Only
    what the event recorded is compared: an event from before its run's task instances were settled, or from
    before the chains covered them, vouches for what it holds."""
    out: list[Break] = []
    for run_id in sorted(set(runs) | set(recorded)):
        now = runs.get(run_id)
        event_id, then = recorded.get(run_id, (None, None))
        if now is None:
            if then is not None:
                out.append(Break(chain, f"run {run_id} is gone, but event {event_id} reports it: it was deleted"))
            continue
        if event_id is None:
            out.append(Break(chain, f"run {run_id} ({now['state']}) has no event: it was written outside ledger"))
            continue
        if then is not None:
            now = {k: v for k, v in now.items() if k in then or k not in _COVERED}
        if now != then:
            changed = ", ".join((_COVERED[k] if k in _COVERED else
                                 f"{k} {None if then is None else then.get(k)!r} -> {now.get(k)!r}") for k in now
                                if then is None or then.get(k) != now.get(k))
            out.append(Break(chain, f"run {run_id} is not what its last event ({event_id}) recorded ({changed}): "
                                    "no event explains it"))
    return out


# -- the facts of a run's row that events state (decision 0353) ----------------------------------------------

CREATED = "run_created"
FACTS = ("logical_date", "data_interval_start", "data_interval_end", "run_type", "backfill_id", "conf_sha256",
         "overridden_by")
"""What a run's row says of where its date came from, as run_facts gives it and events state it."""
_INSTANTS = ("logical_date", "data_interval_start", "data_interval_end")
_UNKNOWN = object()


def run_facts(logical_date: datetime | str, data_interval_start: datetime | str, data_interval_end: datetime | str,
              run_type: str, backfill_id: int | None, conf: Any, overridden_by: int | None) -> dict[str, Any]:
    """A run's row as fact_breaks compares it with the events: instants as timestamp(), its conf by conf_digest."""
    instants = {k: _instant(v) for k, v in zip(_INSTANTS, (logical_date, data_interval_start, data_interval_end),
                                               strict=True)}
    return {**{k: None if v is _UNKNOWN else v for k, v in instants.items()}, "run_type": run_type,
            "backfill_id": backfill_id, "conf_sha256": conf_digest(conf), "overridden_by": overridden_by}


def created_details(logical_date: datetime, data_interval_start: datetime, data_interval_end: datetime,
                    run_type: str, version: str, previous_run_id: int | None, backfill_id: int | None,
                    conf: Any) -> dict[str, Any]:
    """The details of a `run_created` event: the facts of the new run's row that nothing else records."""
    return {"logical_date": logical_date.isoformat(), "data_interval_start": data_interval_start.isoformat(),
            "data_interval_end": data_interval_end.isoformat(), "run_type": run_type, "version": version,
            "previous_run_id": None if previous_run_id is None else str(previous_run_id),
            "backfill_id": backfill_id, "conf_sha256": conf_digest(conf)}


def _instant(value: Any) -> Any:
    """A date as timestamp() gives it (an ISO text in any offset, or a datetime); anything else: _UNKNOWN."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return _UNKNOWN
    if not isinstance(value, datetime) or value.tzinfo is None:
        return _UNKNOWN
    return timestamp(value)


def _run_id(value: Any) -> Any:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else _UNKNOWN


Recorded = dict[int, dict[str, tuple[int, str, Any]]]
"""run id -> fact -> (id of the last event that stated it, that event's kind, what it stated)."""


def recorded_facts(events: Iterable[ChainedEvent]) -> Recorded:
    """What the events (in chain order) state of their runs' facts: a `run_created` event the date, data interval,
    type, backfill and conf digest it gives (an event recorded before it gave some of them states the others) and
    that the run was overridden by no run; a `run_overridden` event the run that overrode it; a `run_restored`
    event that none did. A value the event gives in no known form states nothing."""
    found: Recorded = {}
    for e in events:
        details = e.details if isinstance(e.details, dict) else {}
        if e.run_id is None or e.kind not in (CREATED, "run_overridden", "run_restored"):
            continue
        facts = found.setdefault(e.run_id, {})
        stated: dict[str, Any] = {}
        if e.kind == CREATED:
            stated = {k: _instant(details[k]) for k in _INSTANTS if k in details}
            if isinstance(details.get("run_type"), str):
                stated["run_type"] = details["run_type"]
            if "backfill_id" in details:
                stated["backfill_id"] = _run_id(details["backfill_id"])
            if "conf_sha256" in details:
                stated["conf_sha256"] = details["conf_sha256"]
            stated["overridden_by"] = None
        elif e.kind == "run_overridden":
            stated["overridden_by"] = _run_id(details.get("overridden_by"))
        else:
            stated["overridden_by"] = None
        for k, v in stated.items():
            if v is _UNKNOWN:
                facts.pop(k, None)
            else:
                facts[k] = (e.id, e.kind, v)
    return found


def _shown(value: Any) -> str:
    return repr(value[:12] + "...") if isinstance(value, str) and len(value) == 64 else repr(value)


def fact_breaks(chain: str, recorded: Recorded, runs: Mapping[int, Mapping[str, Any]]) -> list[Break]:
    """Each run (`runs`: run id -> run_facts of its row now) with a fact that is not what the last event stating
    it recorded: one line per run and event."""
    out: list[Break] = []
    for run_id in sorted(runs):
        by_event: dict[tuple[int, str], list[str]] = {}
        for k, (event_id, kind, then) in sorted(recorded.get(run_id, {}).items(), key=lambda i: FACTS.index(i[0])):
            now = runs[run_id].get(k, then)
            if now != then:
                by_event.setdefault((event_id, kind), []).append(f"{k} {_shown(then)} -> {_shown(now)}")
        out += [Break(chain, f"run {run_id} is not what event {event_id} ({kind}) recorded of it "
                             f"({', '.join(changed)}): no event explains it")
                for (event_id, kind), changed in sorted(by_event.items())]
    return out
