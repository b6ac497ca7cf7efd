"""Where ledger keeps its files and database, read from the environment once per command."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import ConfigError
from ledger.infra.settings import value as setting

SUPPORTED = "sqlite:///PATH or postgresql://USER@HOST:PORT/DB (psycopg 3)"


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    database_url: str
    dags_folder: Path

    @property
    def logs_folder(self) -> Path:
        return self.home / "logs"


def load_settings(env: dict[str, str] | None = None, *, dags_folder: str | Path | None = None) -> Settings:
    """Settings from LEDGER_HOME, LEDGER_DATABASE_URL and LEDGER_DAGS_FOLDER (or the --dags-folder flag)."""
    env = dict(os.environ) if env is None else env
    home = (setting("LEDGER_HOME", env) or Path.home() / ".ledger").expanduser().resolve()
    if home.exists() and not home.is_dir():
        raise ConfigError(f"LEDGER_HOME {home} is a file, not a folder; point LEDGER_HOME at a folder")
    url = normalise_database_url(setting("LEDGER_DATABASE_URL", env) or f"sqlite:///{home / 'ledger.db'}")
    folder = dags_folder or setting("LEDGER_DAGS_FOLDER", env) or home / "dags"
    return Settings(home=home, database_url=url, dags_folder=Path(folder).expanduser().resolve())


def normalise_database_url(url: str) -> str:
    """The SQLAlchemy URL ledger connects with: `postgresql://` and `postgres://` use the installed psycopg
    (3) driver; any backend but SQLite and PostgreSQL is refused with one line that says what works."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError(f"LEDGER_DATABASE_URL {url!r} is not a database URL; use {SUPPORTED}")
    backend, _, driver = scheme.lower().partition("+")
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise ConfigError(f"LEDGER_DATABASE_URL uses the driver {driver!r}, which ledger does not install; "
                              f"use postgresql:// or postgresql+psycopg://")
        return f"postgresql+psycopg://{rest}"
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return url
    raise ConfigError(f"LEDGER_DATABASE_URL: the backend {scheme!r} is not supported; use {SUPPORTED}")
