"""The statements a database's own dialect builds (INSERT ... ON CONFLICT), its module imported by the first
statement that needs it: a SQLite ledger's processes never load SQLAlchemy's PostgreSQL dialect (decision 0307)."""

from __future__ import annotations

from typing import Any

CONFLICT_DIALECTS = ("postgresql", "sqlite")


def conflict_insert(dialect: str) -> Any:
    """`insert` of the dialect named (SQLite's or PostgreSQL's), the one with `on_conflict_do_nothing`."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert
    raise NotImplementedError(f"the ledger needs SQLite or PostgreSQL, not {dialect}")
