"""What every command needs: settings, the database (checked to be at head), a clock and an actor."""

from __future__ import annotations

import getpass
import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine

from ledger.core.errors import DagNotFound, InvalidInput
from ledger.infra.clock import Clock, SystemClock
from ledger.infra.config import Settings, load_settings
from ledger.store.db import ensure_ready, make_engine, make_read_engine, make_sessions

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


def actor_name(role: str = "cli") -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{role}:{user}@{socket.gethostname()}"


@dataclass
class Env:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    actor: str = field(default_factory=actor_name)

    @cached_property
    def engine(self) -> Engine:
        return make_engine(self.settings.database_url)

    @cached_property
    def read_engine(self) -> Engine:
        """Connections that cannot write (SQLite opened read-only, PostgreSQL READ ONLY transactions)."""
        return make_read_engine(self.settings.database_url)

    @cached_property
    def sessions(self) -> sessionmaker[Session]:
        ensure_ready(self.settings.database_url, self.read_engine)
        return make_sessions(self.engine)

    _staged: list[Any] = field(default_factory=list)  # parse results refresh_dags() read, not yet written

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One transaction per operation: committed at the end, rolled back on any error. What refresh_dags()
        found (new versions, import errors) is written in this same transaction: a command that is refused
        leaves the database exactly as it was, the DAG versions it read included."""
        from ledger.scheduler.parsing.dag_sync import sync_results

        with self.sessions.begin() as session:
            for results, contents, stale in self._staged:
                sync_results(session, results, now=self.clock.now(), actor=self.actor, code=contents, stale=stale)
            yield session
        self._staged.clear()

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A read-only transaction: on SQLite it never takes the write lock, so a long read does not stall
        a scheduler. Nothing it does is committed."""
        ensure_ready(self.settings.database_url, self.read_engine)
        session = make_sessions(self.read_engine)()
        try:
            yield session
        finally:
            session.close()  # ends the transaction without a commit; loaded objects stay readable

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        """A read-only transaction on a plain connection, for reads through the Core tables (ledger/store/run_reads.py):
        what `reading` is, without SQLAlchemy's ORM (decision 0317). Nothing it does is committed."""
        ensure_ready(self.settings.database_url, self.read_engine)
        with self.read_engine.connect() as conn:
            yield conn  # closing the connection rolls its transaction back

    def require_dags_folder(self) -> None:
        """A DAGs folder that is missing is an error, never "every DAG was deleted"."""
        folder = self.settings.dags_folder
        if not folder.is_dir():
            raise InvalidInput(f"the DAGs folder {folder} does not exist or is not a folder; create it, or "
                               "give another with --dags-folder or LEDGER_DAGS_FOLDER")

    def refresh_dags(self) -> None:
        """Bring DAG versions and import errors up to date with the DAGs folder (idempotent).

        Runs in its own transactions, before the command's: no lock is held while files are imported.
        Files are imported in DAG file processors (a file that hangs is killed after the processor
        timeout), and only files that are new or changed since they were last parsed.
        """
        from multiprocessing.connection import wait

        from ledger.infra.scheduler_settings import SchedulerSettings
        from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager, processor_log
        from ledger.scheduler.parsing.dag_sync import (
            code_needed,
            known_dependencies,
            known_hashes,
            known_owners,
            read_code,
        )

        s = SchedulerSettings.from_env()
        self.require_dags_folder()
        with self.sessions.begin() as session:
            seen, owners, deps = known_hashes(session), known_owners(session), known_dependencies(session)
        manager = DagFileProcessorManager(
            self.settings.dags_folder, parsing_processes=s.parsing_processes,
            min_file_process_interval=s.min_file_process_interval, dag_dir_list_interval=s.dag_dir_list_interval,
            file_timeout=s.dag_file_processor_timeout, log_file=processor_log(self.settings.logs_folder))
        manager.seed(seen, owners, deps)
        with manager:
            results = manager.poll()
            while manager.busy():
                wait(manager.wait_handles(), timeout=0.05)
                results += manager.poll()
        if results:  # the files a new version needs are read now, outside any transaction
            with self.sessions.begin() as session:
                needed = code_needed(session, results)
            contents, stale = read_code(needed) if needed else ({}, set())
            self._staged.append((results, contents, stale))


def open_env(dags_folder: Path | None = None) -> Env:
    return Env(settings=load_settings(dags_folder=dags_folder))


def refuse_unknown_filters(session: Session, dag_id: str | None, run_id: int | str | None) -> None:
    """A listing filtered on a DAG or a run that does not exist is refused in one line, not an empty listing."""
    from ledger.store import dags as dag_store
    from ledger.store import runs as run_store

    if dag_id is not None and dag_store.find(session, dag_id) is None:
        raise DagNotFound(dag_id)
    if run_id is not None:
        run_store.get(session, run_id)


def print_json(value: Any) -> None:
    """Indented JSON; a long list is written compactly (the same document, several times faster). Always JSON: a
    NaN or infinite number (a conf stored before conf was strict) is written as its name, a string."""
    from ledger.core.strict_json import finite

    compact = isinstance(value, list) and len(value) > 500
    options: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 2}
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, **options)
    except ValueError:  # (rare: walked only then)
        text = json.dumps(finite(value), ensure_ascii=False, allow_nan=False, **options)
    sys.stdout.write(text + "\n")


def parse_conf(text: str | None, option: str = "--conf") -> dict[str, Any] | None:
    """A JSON object given on the command line (None when not given); bad JSON is a usage error (one line,
    exit status 2)."""
    import typer

    if text is None:
        return None
    from ledger.core import strict_json
    from ledger.core.errors import InvalidInput

    try:
        value = strict_json.loads(text, option)
    except InvalidInput as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{option}'") from None
    if not isinstance(value, dict):
        raise typer.BadParameter(f"{option} must be a JSON object, like '{{\"key\": \"value\"}}'",
                                 param_hint=f"'{option}'")
    return value
