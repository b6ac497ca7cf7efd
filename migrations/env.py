"""Alembic environment: the URL comes from the Config the ledger builds; no alembic.ini is needed."""

from __future__ import annotations

from alembic import context

from ledger.models import Base
from ledger.store.db import make_engine

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(str(config.get_main_option("sqlalchemy.url")), create=True)
    with engine.connect() as conn:
        sqlite = engine.dialect.name == "sqlite"
        if sqlite:
            # SQLite changes a table by copying it, dropping the old one and renaming the copy ("batch"
            # mode); with foreign keys enforced, dropping a table that other rows point at fails. They are
            # switched off for the migration (outside its transaction, as SQLite requires) and every
            # reference is checked before the transaction commits.
            conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration left {len(broken)} broken references, e.g. {broken[0]}")
        if sqlite:
            conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
