"""Engines and sessions: SQLite (WAL, immediate write transactions) by default, PostgreSQL by URL."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from ledger.core.errors import DatabaseNotReady
from ledger.store.schema import HEAD

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"  # ledger/migrations


def _server_options(backend: str) -> None:
    """The models' options for a database server (ledger/models/tables.py), known only once one is used."""
    if backend == "postgresql":
        from ledger.models.tables import with_postgresql_options

        with_postgresql_options()


def make_engine(url: str, *, create: bool = False, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite files get WAL mode, a busy timeout and BEGIN IMMEDIATE transactions.
    `create`: make the SQLite file's folder (only `ledger db upgrade` creates a database)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        _server_options(parsed.get_backend_name())
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, **kwargs)
    if create and parsed.database and parsed.database != ":memory:":
        folder = Path(parsed.database).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file where a folder should be, a folder that cannot be written
            raise DatabaseNotReady(f"cannot make the database's folder {folder}: {exc.strerror or exc}") from None
    engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # take transaction control from pysqlite so that BEGIN IMMEDIATE below is ours
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # a transaction that may write takes the write lock up front: no deadlocks from read-to-write
        # upgrades; readers (engines made by `reader`) begin a plain deferred transaction. Straight on the
        # driver's connection (every transaction begins here: SQLAlchemy's execution costs more than BEGIN), its
        # error raised as SQLAlchemy's (a locked file is an OperationalError, which callers retry)
        sql = "BEGIN" if conn.get_execution_options().get("ledger_read_only") else "BEGIN IMMEDIATE"
        try:
            conn.connection.dbapi_connection.execute(sql)
        except sqlite3.Error as exc:
            lost = conn.dialect.is_disconnect(exc, conn.connection.dbapi_connection, None)
            raise DBAPIError.instance(sql, None, exc, sqlite3.Error, dialect=conn.dialect,
                                      connection_invalidated=lost) from exc

    return engine


def shares_one_connection(engine: Engine) -> bool:
    """Whether every checkout of the engine's pool is the same DB-API connection (SQLite's `:memory:`)."""
    return isinstance(engine.pool, (SingletonThreadPool, StaticPool))


def reader(engine: Engine) -> Engine:
    """The same engine for read-only work: on SQLite its transactions do not take the write lock."""
    return engine.execution_options(ledger_read_only=True)


def _open_sqlite_read_only(path: str) -> sqlite3.Connection:
    """A connection that cannot write the file. A WAL database needs its -shm file: when no writer has it open
    and the folder cannot be written (a read-only LEDGER_HOME), SQLite cannot create it and refuses with
    "unable to open database file"; then nothing can be writing, and the file is read as immutable."""
    target = quote(str(Path(path).resolve()))
    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=60, check_same_thread=False)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as exc:
        conn.close()
        if "unable to open" not in str(exc):
            raise
        conn = sqlite3.connect(f"file:{target}?mode=ro&immutable=1", uri=True, check_same_thread=False)
    conn.isolation_level = None  # transactions are ours: a plain deferred BEGIN, see make_read_engine
    conn.execute("PRAGMA busy_timeout=60000")
    return conn


def make_read_engine(url: str, **kwargs: Any) -> Engine:
    """An engine whose connections cannot write: read commands work on a read-only LEDGER_HOME and never take
    SQLite's write lock; on PostgreSQL every transaction is READ ONLY."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        _server_options(parsed.get_backend_name())
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, execution_options={"postgresql_readonly": True}, **kwargs)
    path = parsed.database
    if not path or path == ":memory:":
        return reader(make_engine(url, **kwargs))
    engine = create_engine(url, creator=lambda: _open_sqlite_read_only(path), **kwargs)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    """Sessions on `engine` (SQLAlchemy's ORM is imported here, on first use: a command that reads through the
    Core tables alone never loads it, decision 0317)."""
    from sqlalchemy.orm import sessionmaker

    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision(url: str) -> str | None:
    """The newest migration, read from the migration scripts (slow: for `ledger db` and tests)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it has no ledger schema."""
    with reader(engine).connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def describe_database(url: str) -> str:
    """The database URL with any password hidden, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def sqlite_file_missing(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and bool(parsed.database) and parsed.database != ":memory:" \
        and not Path(str(parsed.database)).exists()


def ensure_ready(url: str, engine: Engine) -> None:
    """Raise DatabaseNotReady unless the schema is at the newest migration."""
    where = describe_database(url)
    if sqlite_file_missing(url):
        raise DatabaseNotReady(f"no database at {where}; run `ledger db upgrade` to create it")
    try:
        current = current_revision(engine)
    except Exception as exc:  # connection refused, bad credentials, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseNotReady(f"cannot reach the database at {where}: {first}") from None
    head = HEAD  # kept equal to the newest migration by a test; reading the scripts is slow
    if current is None:
        tables = inspect(engine).get_table_names()
        hint = "it has no ledger schema" if not tables else "it has tables but no ledger schema version"
        raise DatabaseNotReady(f"the database at {where} is not initialised ({hint}); run `ledger db upgrade`")
    if current != head:
        raise DatabaseNotReady(newer_than_this_ledger(where, current) or
                               f"the database at {where} is at revision {current}, not {head}; run `ledger db upgrade`")


def newer_than_this_ledger(where: str, current: str | None) -> str | None:
    """What to say of a database a newer ledger upgraded past this one's newest migration (None: it is not)."""
    if current is None or current <= HEAD:  # (revisions are four digits: their order is the strings')
        return None
    return (f"the database at {where} is at revision {current}, newer than this ledger's {HEAD}: run a ledger that "
            f"knows {current}, or downgrade the database with it (`ledger db downgrade {HEAD}`)")
