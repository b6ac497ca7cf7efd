"""The hash chains of the events (decision 0260): the canonical form of an event, its hash, and the checks that
find where a chain or the rows it reports were changed. Pure: rows come in as plain values, breaks go out as
plain values; reading them is ledger/store/audit.py's, the code's own hashes ledger/services/audit.py's.

An event's hash is the sha256 of the UTF-8 text

    <previous event's hash of its chain> "\\n" <canonical JSON of covers> "\\n" <canonical JSON of the body>

where the body is {"actor", "at", "dag_id", "details", "kind", "run_id"} (`at` as 2024-03-10T12:00:00.000000Z)
and `covers` is what the event's transaction left of the rows it reports: {"run": RUN} for an event about a run
(RUN: {"id", "state", "previous", "version", "code"}: the run's state, previous run, version hash and the key of
that version's code snapshot; and "tries", the tries_digest of its task instances' last tries and outcomes, once
every one has finished), {"runs": {id: RUN}} for the genesis event of a chain (the runs as they were when
verified history began), null otherwise. Canonical JSON: keys sorted, no spaces, not ASCII-escaped. The first
event of a chain follows ZERO.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.core.states import FINISHED_TASK_STATES
from ledger.core.versions import canonical_json

ZERO = "0" * 64
"""What the first event of a chain follows."""
FINISHED_TASKS = frozenset(state.value for state in FINISHED_TASK_STATES)
GLOBAL_CHAIN = ""
"""The chain of the events with no DAG (users, pools, variables...)."""
GENESIS = "audit_started"
"""The event that says where a chain's verified history begins (written by the migration that made the chains)."""


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
              tries: str | None = None) -> dict[str, Any]:
    """What an event records of the run it reports; with `tries` (tries_digest) when its task instances' outcomes
    are recorded too."""
    cover = {"id": run_id, "state": state, "previous": previous, "version": version, "code": code}
    if tries is not None:
        cover["tries"] = tries
    return cover


TaskRow = tuple[str, int, int, str]
"""A task instance as the chain covers it: (task_id, map_index, try_number, state): its last try and its outcome."""


def tries_digest(rows: Iterable[TaskRow], *, only_finished: bool = True) -> str | None:
    """The sha256 of the canonical JSON of a run's task instances (sorted [task_id, map_index, try_number, state]
    lists). An event records it only once every task instance has finished (`only_finished`): from then on only an
    action that writes an event (a clear, a mark) changes them. None: some has not finished."""
    listed = sorted([str(t), int(m), int(n), str(s)] for t, m, n, s in rows)
    if only_finished and any(s not in FINISHED_TASKS for _t, _m, _n, s in listed):
        return None
    return hashlib.sha256(canonical_json(listed).encode()).hexdigest()


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


def _about(e: ChainedEvent) -> str:
    return f"event {e.id} ({e.kind})"


def chain_breaks(chain: str, events: Sequence[ChainedEvent], head: Head | None, *, whole: bool = True,
                 stubs: frozenset[int] = frozenset()) -> list[Break]:
    """The first break of one chain, its events in chain order (seq): an event whose content no longer gives its
    hash (edited), one with no hash (written outside ledger), one that does not follow the one before it (one
    deleted between them, or one inserted), a chain that does not end at its head. `whole`: the events start at
    the chain's beginning (else at --since: the first one's link is taken as it is). `stubs`: ids of events
    given by their hashes only (an export's events outside its range): their links are checked, not their
    content."""
    previous: ChainedEvent | None = None
    seen: dict[str, ChainedEvent] = {}
    for e in events:
        if e.hash is None or e.prev_hash is None:
            return [Break(chain, f"{_about(e)} has no hash: it was written outside ledger")]
        if e.id not in stubs and e.recomputed() != e.hash:
            return [Break(chain, f"{_about(e)} was edited: its content no longer gives its hash")]
        expected = previous.hash if previous is not None else (ZERO if whole else e.prev_hash)
        if e.prev_hash != expected:
            after = f"event {previous.id}" if previous is not None else "the chain's start"
            if e.prev_hash in seen:
                other = seen[e.prev_hash]
                return [Break(chain, f"{_about(e)} follows event {other.id}, not {after}: an event was inserted "
                                     "before it")]
            return [Break(chain, f"{_about(e)} does not follow {after}: the event between them was deleted")]
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
    if whole and len(events) != head.length:
        return [Break(chain, f"the chain has {len(events)} events but its head counts {head.length}")]
    return []


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


def run_breaks(chain: str, recorded: Mapping[int, tuple[int, dict[str, Any] | None]],
               runs: Mapping[int, dict[str, Any]]) -> list[Break]:
    """Each run whose row (`runs`: run id -> run_cover of the row now) is not what the last event about it
    recorded (last_covers), that no event reports, or that an event reports and that is gone."""
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
        if then is not None and "tries" not in then:  # recorded before its task instances had finished (or before
            now = {k: v for k, v in now.items() if k != "tries"}  # the chains covered them): its run row alone
        if now != then:
            changed = ", ".join(("its task instances' tries or outcomes" if k == "tries" else
                                 f"{k} {None if then is None else then.get(k)!r} -> {now.get(k)!r}") for k in now
                                if then is None or then.get(k) != now.get(k))
            out.append(Break(chain, f"run {run_id} is not what its last event ({event_id}) recorded ({changed}): "
                                    "no event explains it"))
    return out
