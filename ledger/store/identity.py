"""The database's identity (migration 0015, decision 0344): what the task ids of its tries carry. Runs in the
caller's transaction."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.infra.workers import DatabaseIdentity
from ledger.models import tables

IDENTITY = tables.database_identity


def read(session: Session) -> DatabaseIdentity:
    """The database's identity (its one row)."""
    row = session.execute(select(IDENTITY.c.identity, IDENTITY.c.legacy_through)).one()
    return DatabaseIdentity(row.identity, row.legacy_through)
