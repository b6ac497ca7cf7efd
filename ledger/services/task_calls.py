"""What task code asks of the ledger (send a signal, trigger a run, read a run's states, read a variable or a
connection), on a database: the client of a try that has the database (ledger/sdk/ledger_client.py chooses it), and
the operations the webserver's worker API runs for a try that has not (ledger/web/worker_api.py). One transaction
each, through the same rules and events as the CLI's: a signal is stored and its doorbells rung after the commit
(SignalService.send), a run is spliced into the triggered DAG's timeline (operations.trigger) with the try as the
event's actor."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pendulum
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from ledger.core.errors import InvalidInput
from ledger.core.signals import Signal
from ledger.infra.clock import SystemClock
from ledger.infra.fernet import decrypt
from ledger.infra.worker_client import TASK_ACTOR, RunStates, Triggered
from ledger.services.operations import trigger
from ledger.services.signal_service import SignalService
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import secrets as secret_store
from ledger.store.db import make_engine, make_sessions, reader

MAX_ACTOR = 250  # characters


def check_actor(actor: str) -> str:
    """A try's identity as the sender or actor of what it does (`task:DAG.TASK@run N try M`): what a worker's
    credential may act as, never a user's name."""
    if not actor.startswith(TASK_ACTOR) or len(actor) > MAX_ACTOR:
        raise InvalidInput(f"a try acts as {TASK_ACTOR}DAG.TASK@run N try M (up to {MAX_ACTOR} characters), not "
                           f"{actor[:60]!r}")
    return actor


def trigger_from_task(session: Session, dag_id: str, at: datetime, conf: dict[str, Any], *, replace: bool,
                      actor: str) -> Triggered:
    """A manual run of `dag_id`'s current version at the interval containing `at` (TriggerDagRunOperator)."""
    spec = dag_store.current_spec(session, dag_id)
    run, replaced = trigger(session, spec, pendulum.instance(at), conf, replace=replace, now=pendulum.now("UTC"),
                            actor=check_actor(actor))
    return Triggered(int(run.id), run.logical_date, int(replaced.id) if replaced is not None else None)


def variable(session: Session, key: str) -> str | None:
    row = secret_store.variable(session, key)
    return decrypt(row.value_encrypted) if row is not None else None


def connection(session: Session, conn_id: str) -> dict[str, Any] | None:
    """A connection's fields, its password and extra decrypted (None: there is none of that id)."""
    row = secret_store.connection(session, conn_id)
    if row is None:
        return None
    return {"conn_id": row.conn_id, "conn_type": row.conn_type, "host": row.host, "port": row.port,
            "login": row.login, "schema": row.schema,
            "password": decrypt(row.password_encrypted) if row.password_encrypted else None,
            "extra": decrypt(row.extra_encrypted) if row.extra_encrypted else None}


class DatabaseClient:
    """The ledger as a try that has the database reaches it: one transaction a call. `pooled` false (a try's): a
    connection a call, none kept open between calls, so that a try forked from a process that made a call (a DAG
    file read before the fork that reads a variable) never shares its parent's connection."""

    def __init__(self, url: str, home: Path, *, pooled: bool = True) -> None:
        engine = make_engine(url) if pooled else make_engine(url, poolclass=NullPool)
        self.sessions = make_sessions(engine)
        self.reads = make_sessions(reader(engine))
        self.signals = SignalService(engine, self.sessions, home, clock=SystemClock())

    def send_signal(self, key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
        return self.signals.send(key, value, sender=check_actor(sender), meta=meta)

    def trigger_run(self, dag_id: str, at: datetime, conf: dict[str, Any], *, replace: bool,
                    actor: str) -> Triggered:
        with self.sessions.begin() as session:
            return trigger_from_task(session, dag_id, at, conf, replace=replace, actor=actor)

    def run_state(self, run_id: int) -> str:
        with self.reads.begin() as session:
            return str(run_store.get(session, run_id).state)

    def states_at(self, dag_id: str, at: datetime) -> RunStates | None:
        with self.reads.begin() as session:
            return run_store.states_at(session, dag_id, at)

    def variable(self, key: str) -> str | None:
        with self.reads.begin() as session:
            return variable(session, key)

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        with self.reads.begin() as session:
            return connection(session, conn_id)
