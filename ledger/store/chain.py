"""Linking events into their hash chains (decision 0260), in the transaction that wrote them, as it commits.

`events.record_many` inserts an event at once (so that the transaction reads it back, and its id is known) and
hands it here with the canonical JSON of its body. When the session commits (ledger/store/commit.py, its first
step), `link` locks the heads of the chains its events belong to (one `SELECT ... FOR UPDATE` of their
`event_chain` rows, in the order of their names, so that two transactions never wait for each other's heads in a
circle), reads what the events report of their runs as the transaction leaves them, and writes each event's
place, previous hash, covers and hash, and each chain's new head. On PostgreSQL the head row's lock holds the next
writer of the chain until this transaction has committed, so that several schedulers keep one chain per DAG; on
SQLite every writing transaction holds the database's write lock from its start (ledger/store/db.py).

Linking at commit, not at insert: a transaction (a scheduler's loop) writes events of several DAGs in whatever
order its work comes; locking each head as it went would let two schedulers take two heads in opposite orders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.orm import Session

from ledger.core.audit import ZERO, TaskRow, body_json, chain_of, event_hash, run_cover, tries_digest
from ledger.core.states import FINISHED_RUN_STATES
from ledger.models import tables
from ledger.store import commit
from ledger.store.dialects import conflict_insert
from ledger.store.hot import Hot

PENDING = "ledger.events_to_link"  # session.info key: the events this transaction wrote, not linked yet

EVENTS = tables.event
CHAINS = tables.event_chain
RUNS = tables.dag_run
VERSIONS = tables.dag_version
TASKS = tables.task_instance
FINISHED_RUNS = frozenset(state.value for state in FINISHED_RUN_STATES)


@dataclass(frozen=True, slots=True)
class _Pending:
    id: int
    chain: str
    run_id: int | None
    body: str


def to_link(session: Session, ids: Sequence[int], rows: Sequence[dict[str, Any]]) -> None:
    """Note events just inserted (ids and their rows, in the same order) for linking when the session commits."""
    if session.in_nested_transaction():
        raise RuntimeError("events are not recorded inside a savepoint: its rollback would leave a hole in a chain")
    pending = session.info.setdefault(PENDING, [])
    for i, r in zip(ids, rows, strict=True):
        pending.append(_Pending(i, chain_of(r["dag_id"]), r["run_id"],
                                body_json(r["at"], r["kind"], r["actor"], r["dag_id"], r["run_id"], r["details"])))


_HEADS = Hot(select(CHAINS.c.chain, CHAINS.c.head_hash, CHAINS.c.length)
             .where(CHAINS.c.chain.in_(bindparam("chains", expanding=True))).order_by(CHAINS.c.chain)
             .with_for_update())
_COVERS = Hot(select(RUNS.c.id, RUNS.c.state, RUNS.c.previous_run_id, RUNS.c.version_hash, VERSIONS.c.code_snapshot)
              .select_from(RUNS.outerjoin(VERSIONS, and_(VERSIONS.c.dag_id == RUNS.c.dag_id,
                                                         VERSIONS.c.version_hash == RUNS.c.version_hash)))
              .where(RUNS.c.id.in_(bindparam("ids", expanding=True))))
_TASKS = Hot(select(TASKS.c.run_id, TASKS.c.task_id, TASKS.c.map_index, TASKS.c.try_number, TASKS.c.state)
             .where(TASKS.c.run_id.in_(bindparam("ids", expanding=True))))
_LINK = Hot(update(EVENTS).where(EVENTS.c.id == bindparam("eid"))
            .values(seq=bindparam("s"), prev_hash=bindparam("p"), covers=bindparam("c", type_=EVENTS.c.covers.type),
                    hash=bindparam("h")))
_MOVE_HEAD = Hot(update(CHAINS).where(CHAINS.c.chain == bindparam("name"))
                 .values(head_id=bindparam("i"), head_hash=bindparam("h"), length=bindparam("n")))


def run_covers(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """What an event about each of these runs records of it (ledger.core.audit.run_cover), as the rows are now: a
    finished run's task instances too, once all of them have finished."""
    if not run_ids:
        return {}
    rows = _COVERS.rows(session, {"ids": list(run_ids)})
    finished = [row[0] for row in rows if row[1] in FINISHED_RUNS]
    tasks: dict[int, list[TaskRow]] = {run_id: [] for run_id in finished}
    if finished:
        for run_id, *task in _TASKS.rows(session, {"ids": finished}):
            tasks[run_id].append((task[0], task[1], task[2], task[3]))
    return {run_id: run_cover(run_id, state, previous, version, code,
                              tries=tries_digest(tasks[run_id]) if run_id in tasks else None)
            for run_id, state, previous, version, code in rows}


def _lock_heads(session: Session, chains: list[str]) -> dict[str, list[Any]]:
    heads = {name: [h, n] for name, h, n in _HEADS.rows(session, {"chains": chains})}
    missing = [{"chain": c, "head_hash": ZERO, "length": 0} for c in chains if c not in heads]
    if missing:  # a chain's first event: make its head row (another writer may make it at the same moment)
        dialect = session.get_bind().dialect.name
        insert: Any = conflict_insert(dialect)(CHAINS)
        session.execute(insert.on_conflict_do_nothing(index_elements=["chain"]), missing)
        heads = {name: [h, n] for name, h, n in _HEADS.rows(session, {"chains": chains})}
    return heads


def link(session: Session) -> None:
    """Link the events this session's transaction wrote into their chains (before it commits)."""
    pending: list[_Pending] = session.info.pop(PENDING, None) or []
    if not pending:
        return
    session.flush()  # the runs as this transaction leaves them
    heads = _lock_heads(session, sorted({p.chain for p in pending}))
    covers = run_covers(session, sorted({p.run_id for p in pending if p.run_id is not None}))
    links, moved = [], {}
    for p in sorted(pending, key=lambda p: p.id):
        head = heads[p.chain]
        cover = None if p.run_id is None else {"run": covers.get(p.run_id)}
        h = event_hash(head[0], cover, p.body)
        links.append({"eid": p.id, "s": head[1] + 1, "p": head[0], "c": cover, "h": h})
        head[0], head[1] = h, head[1] + 1
        moved[p.chain] = {"name": p.chain, "i": p.id, "h": h, "n": head[1]}
    _LINK.run(session, links)
    _MOVE_HEAD.run(session, list(moved.values()))


def forget(session: Session) -> None:
    """The transaction ended (committed or not): nothing is left to link."""
    session.info.pop(PENDING, None)


commit.step(1, link, forget)
