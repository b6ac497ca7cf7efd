"""The database's identity (migration 0015, decision 0344): what the task ids of its tries carry. Runs in the
caller's transaction."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.core.errors import DatabaseNotReady
from ledger.infra.workers import DatabaseIdentity
from ledger.models import tables

IDENTITY = tables.database_identity


def read(session: Session) -> DatabaseIdentity:
    """The database's identity (its one row; DatabaseNotReady when it has none, which only a hand-made change can
    cause: its tries could not be told from another database's in Redis)."""
    row = session.execute(select(IDENTITY.c.identity, IDENTITY.c.legacy_through)).first()
    if row is None:
        raise DatabaseNotReady("the database has no identity (table database_identity is empty): restore it from a "
                               "backup, or downgrade to 0014 and upgrade again to make a new one")
    return DatabaseIdentity(row.identity, row.legacy_through)
