"""The one way task code reaches the ledger: signals (`context.send_signal`), TriggerDagRunOperator,
ExternalTaskSensor, variables and connections all call `client()`.

It talks to the database of the try's environment where the try has it (a scheduler's try), and to ledger's
webserver's worker API where it has not (a try on a Celery worker, with the worker's LEDGER_WORKER_TOKEN); with
neither, it refuses with one line and creates nothing (ledger/infra/worker_client.py: reach). Either way a call is one
transaction through the rules the CLI's commands use (ledger/services/task_calls.py).

The database's client is loaded by its name (DATABASE_CLIENT) when it is chosen, not imported by this module: the
try side imports no database layer (tests/test_folders.py), and a try on a worker, which never chooses it, never
loads SQLAlchemy or the store. A try that has the database loads them as the scheduler does."""

from __future__ import annotations

import importlib
from datetime import datetime
from typing import Any, Protocol

from ledger.core.signals import Signal
from ledger.infra.config import load_settings
from ledger.infra.worker_client import DATABASE, Place, RunStates, Triggered, WorkerClient, reach


class LedgerClient(Protocol):
    def send_signal(self, key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
        """Store the next version of `key`, sent by `sender` (a try: ledger.infra.worker_client.try_actor)."""

    def trigger_run(self, dag_id: str, at: datetime, conf: dict[str, Any], *, replace: bool,
                    actor: str) -> Triggered:
        """A manual run of `dag_id` at the interval containing `at` (TimelineConflict: a live run is there)."""

    def run_state(self, run_id: int) -> str:
        """The state of run `run_id` (RunNotFound: no such run)."""

    def states_at(self, dag_id: str, at: datetime) -> RunStates | None:
        """The live run of `dag_id` at logical date `at`: its state and its tasks' states; None: no run there."""

    def variable(self, key: str) -> str | None:
        """A stored variable's value (decrypted); None: not set."""

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        """A stored connection's fields (password and extra decrypted); None: not defined."""


DATABASE_CLIENT = "ledger.services.task_calls"  # the module of DatabaseClient (see the module docstring)
_opened: tuple[Place, LedgerClient] | None = None  # one client a process, for as long as the place stays the same


def open_client(place: Place) -> LedgerClient:
    if place.kind == DATABASE:
        made: LedgerClient = importlib.import_module(DATABASE_CLIENT).DatabaseClient(
            place.url, load_settings().home, pooled=False)
        return made
    return WorkerClient(place.url, place.token)


def client() -> LedgerClient:
    """The client of this process's place (see the module docstring); ConfigError when the try reaches no ledger."""
    global _opened
    place = reach()
    if _opened is None or _opened[0] != place:
        _opened = (place, open_client(place))
    return _opened[1]
