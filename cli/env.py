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
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.clock import Clock, SystemClock
from ledger.config import Settings, load_settings
from ledger.dagbag import collect
from ledger.db import ensure_ready, make_engine, make_sessions
from ledger.errors import InvalidInput
from ledger.sync import sync_bag


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
    def sessions(self) -> sessionmaker[Session]:
        ensure_ready(self.settings.database_url, self.engine)
        return make_sessions(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One transaction per operation: committed at the end, rolled back on any error."""
        with self.sessions.begin() as session:
            yield session

    def refresh_dags(self, session: Session) -> None:
        """Parse the DAGs folder and record versions and import errors (idempotent)."""
        bag = collect(self.settings.dags_folder)
        sync_bag(session, bag, now=self.clock.now(), actor=self.actor)


def open_env(dags_folder: Path | None = None) -> Env:
    return Env(settings=load_settings(dags_folder=dags_folder))


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def parse_conf(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--conf is not valid JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise InvalidInput("--conf must be a JSON object, like '{\"key\": \"value\"}'")
    return value
