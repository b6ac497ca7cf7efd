"""Linking events into their hash chains (decision 0260), in the transaction that wrote them, as it commits.

`events.record_many` hands each event here (`to_link`) with the canonical JSON of its body; it is not inserted
yet. When the session commits (ledger/store/commit.py, its first step), `link` locks the heads of the chains its
events belong to (one `SELECT ... FOR UPDATE` of their `event_chain` rows, in the order of their names, so that
two transactions never wait for each other's heads in a circle), reads what the events report of their runs as
the transaction leaves them, and inserts each event with its place, previous hash, covers and hash, then moves
each chain's head: one statement per event (decision 0327). On PostgreSQL the head row's lock holds the next
writer of the chain until this transaction has committed, so that several schedulers keep one chain per DAG; on
SQLite every writing transaction holds the database's write lock from its start (ledger/store/db.py).

A statement of the session that names the event table (a listing, the events of its runs), run before the
transaction commits, first writes out the events it has recorded (`write_out`: inserted unlinked), as the ORM
flushes its pending objects before a query, so that it finds them; `written_ids` does the same, so that their ids
are known. Those are linked at commit by an update, as every event was before decision 0327. (Hot statements,
ledger/store/hot.py, do not write them out: the loop's own check for others' events, ledger/store/loop.py
`events_since`, leaves the transaction's events out anyway.)

Linking at commit, not at insert: a transaction (a scheduler's loop) writes events of several DAGs in whatever
order its work comes; locking each head as it went would let two schedulers take two heads in opposite orders.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, event, select, update
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import visitors
from sqlalchemy.sql.expression import TableClause, TextClause

from ledger.core.audit import (
    FINISHED_RUNS,
    OVERRIDDEN,
    ZERO,
    TaskRow,
    TryRow,
    WriteRow,
    body_json,
    chain_of,
    event_hash,
    rows_digest,
    run_cover,
    tasks_recorded,
    tries_digest,
)
from ledger.models import tables
from ledger.store import commit
from ledger.store.dialects import conflict_insert
from ledger.store.hot import Hot

PENDING = "ledger.events_to_link"  # session.info key: the events this transaction recorded, not linked yet
WRITTEN = "ledger.events_written"  # session.info key: the ids of the events this session inserted

EVENTS = tables.event
CHAINS = tables.event_chain
RUNS = tables.dag_run
VERSIONS = tables.dag_version
TASKS = tables.task_instance
TRIES = tables.task_try
WRITES = tables.lineage_write


@dataclass(slots=True)
class _Pending:
    row: dict[str, Any]  # the event's own columns (at, kind, actor, dag_id, run_id, details)
    chain: str
    body: str
    id: int | None = None  # set once inserted: at commit, or before it by write_out


def to_link(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Note events (their own columns) to be inserted and linked when the session commits."""
    if session.in_nested_transaction():
        raise RuntimeError("events are not recorded inside a savepoint: its rollback would leave a hole in a chain")
    pending = session.info.setdefault(PENDING, [])
    for r in rows:  # (the details copied: inserted as they were hashed, whatever the caller does with its own dict)
        pending.append(_Pending({**r, "details": copy.deepcopy(r["details"])}, chain_of(r["dag_id"]),
                                body_json(r["at"], r["kind"], r["actor"], r["dag_id"], r["run_id"], r["details"])))


def write_out(session: Session) -> None:
    """Insert the events this transaction recorded and has not inserted yet, unlinked (they are linked as it
    commits): a read of the event table in the transaction then finds them, and their ids are known."""
    unwritten = [p for p in session.info.get(PENDING, ()) if p.id is None]
    if unwritten:
        if session.in_nested_transaction():  # the savepoint's rollback would take rows the commit then links
            raise RuntimeError("recorded events are not written out inside a savepoint: read the event table "
                               "before it begins")
        _inserted(session, unwritten, _INSERT.rows_of_each(session, [p.row for p in unwritten]))


def written_ids(session: Session) -> list[int]:
    """The ids of the events this session inserted (the recorded ones written out first)."""
    write_out(session)
    return list(session.info.get(WRITTEN, []))


@event.listens_for(Session, "do_orm_execute")
def _before_a_statement(state: ORMExecuteState) -> None:
    """A statement of the session on the event table finds the events its transaction recorded."""
    pending = state.session.info.get(PENDING)
    if pending and pending[-1].id is None and _names_events(state.statement):  # (the unwritten ones come last)
        write_out(state.session)


def _names_events(statement: Any) -> bool:
    for element in visitors.iterate(statement):
        if isinstance(element, TextClause):  # plain SQL: the table's name as a word of it
            if _EVENT_WORD.search(element.text):
                return True
            continue
        table = element if isinstance(element, TableClause) else getattr(element, "table", None)
        if isinstance(table, TableClause) and table.name == EVENTS.name:
            return True
    return False


_EVENT_WORD = re.compile(rf"\b{EVENTS.name}\b", re.IGNORECASE)


def _inserted(session: Session, pending: list[_Pending], ids: list[tuple[Any, ...]]) -> None:
    for p, (i,) in zip(pending, ids, strict=True):
        p.id = i
    session.info.setdefault(WRITTEN, []).extend(p.id for p in pending)


_HEADS = Hot(select(CHAINS.c.chain, CHAINS.c.head_hash, CHAINS.c.length)
             .where(CHAINS.c.chain.in_(bindparam("chains", expanding=True))).order_by(CHAINS.c.chain)
             .with_for_update())
_COVERS = Hot(select(RUNS.c.id, RUNS.c.state, RUNS.c.previous_run_id, RUNS.c.version_hash, VERSIONS.c.code_snapshot)
              .select_from(RUNS.outerjoin(VERSIONS, and_(VERSIONS.c.dag_id == RUNS.c.dag_id,
                                                         VERSIONS.c.version_hash == RUNS.c.version_hash)))
              .where(RUNS.c.id.in_(bindparam("ids", expanding=True))))
_TASKS = Hot(select(TASKS.c.run_id, TASKS.c.task_id, TASKS.c.map_index, TASKS.c.try_number, TASKS.c.state,
                    TRIES.c.try_number, TRIES.c.state, TRIES.c.dag_version)
             .select_from(TASKS.outerjoin(TRIES, TRIES.c.task_instance_id == TASKS.c.id))
             .where(TASKS.c.run_id.in_(bindparam("ids", expanding=True))))
_WRITES = Hot(select(WRITES.c.run_id, WRITES.c.task_id, WRITES.c.try_number, WRITES.c.dataset, WRITES.c.partition,
                     WRITES.c.dag_version, WRITES.c.try_state, WRITES.c.rows, WRITES.c.path)
              .where(WRITES.c.run_id.in_(bindparam("ids", expanding=True))))
_INSERT = Hot(EVENTS.insert().returning(EVENTS.c.id, sort_by_parameter_order=True))
_LINK = Hot(update(EVENTS).where(EVENTS.c.id == bindparam("eid"))
            .values(seq=bindparam("s"), prev_hash=bindparam("p"), covers=bindparam("c", type_=EVENTS.c.covers.type),
                    hash=bindparam("h")))
_MOVE_HEAD = Hot(update(CHAINS).where(CHAINS.c.chain == bindparam("name"))
                 .values(head_id=bindparam("i"), head_hash=bindparam("h"), length=bindparam("n")))


def run_covers(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """What an event about each of these runs records of it (ledger.core.audit.run_cover), as the rows are now: a
    finished or overridden run's task instances, tries and lineage writes too, once they are settled
    (tasks_recorded). One statement for the runs, one for the task instances with their tries and one for the
    lineage writes, those two only when the transaction reports a finished or overridden run."""
    if not run_ids:
        return {}
    rows = _COVERS.rows(session, {"ids": list(run_ids)})
    ended = {row[0]: row[1] for row in rows if row[1] in FINISHED_RUNS or row[1] == OVERRIDDEN}
    tasks: dict[int, dict[tuple[str, int], TaskRow]] = {run_id: {} for run_id in ended}
    tries: dict[int, list[TryRow]] = {run_id: [] for run_id in ended}
    writes: dict[int, list[WriteRow]] = {}
    if ended:
        for run_id, task_id, map_index, try_number, state, number, try_state, version in _TASKS.rows(
                session, {"ids": list(ended)}):
            tasks[run_id][(task_id, map_index)] = (task_id, map_index, try_number, state)
            if number is not None:
                tries[run_id].append((task_id, map_index, number, try_state, version))
        settled = [r for r in ended if tasks_recorded(ended[r], (t[3] for t in tasks[r].values()))]
        if settled:
            writes = {run_id: [] for run_id in settled}
            for run_id, *write in _WRITES.rows(session, {"ids": settled}):
                writes[run_id].append((write[0], write[1], write[2], write[3], write[4], write[5], write[6],
                                       write[7]))
    return {run_id: run_cover(run_id, state, previous, version, code, *(
                (tries_digest(tasks[run_id].values(), only_finished=False), rows_digest(tries[run_id]),
                 rows_digest(writes[run_id])) if run_id in writes else ()))
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
    covers = run_covers(session, sorted({r for p in pending if (r := p.row["run_id"]) is not None}))
    links, inserts, last = [], [], {}
    for p in pending:  # in the order they were recorded: the written-out ones (with ids) come first
        head = heads[p.chain]
        run_id = p.row["run_id"]
        cover = None if run_id is None else {"run": covers.get(run_id)}
        h = event_hash(head[0], cover, p.body)
        if p.id is None:
            inserts.append({**p.row, "seq": head[1] + 1, "prev_hash": head[0], "covers": cover, "hash": h})
        else:
            links.append({"eid": p.id, "s": head[1] + 1, "p": head[0], "c": cover, "h": h})
        head[0], head[1] = h, head[1] + 1
        last[p.chain] = p
    _LINK.run(session, links)
    unwritten = [p for p in pending if p.id is None]
    if unwritten:
        _inserted(session, unwritten, _INSERT.rows_of_each(session, inserts))
    _MOVE_HEAD.run(session, [{"name": name, "i": p.id, "h": heads[name][0], "n": heads[name][1]}
                             for name, p in last.items()])


def forget(session: Session) -> None:
    """The transaction ended (committed or not): nothing is left to link."""
    session.info.pop(PENDING, None)


commit.step(1, link, forget)
