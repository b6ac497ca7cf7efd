"""Variables and connections, as stored (their secrets encrypted by ledger/infra/fernet.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.models import Connection, Variable


def set_variable(session: Session, key: str, encrypted: str, description: str, now: datetime) -> bool:
    """True when it was new."""
    row = session.get(Variable, key)
    if row is None:
        session.add(Variable(key=key, value_encrypted=encrypted, description=description, updated_at=now))
        return True
    row.value_encrypted, row.updated_at = encrypted, now
    row.description = description or row.description
    return False


def variable(session: Session, key: str) -> Variable | None:
    return session.get(Variable, key)


def variables(session: Session) -> list[Variable]:
    return list(session.scalars(select(Variable).order_by(Variable.key)))


def delete(session: Session, row: Any) -> None:
    session.delete(row)


def set_connection(session: Session, values: dict[str, Any], now: datetime) -> bool:
    """True when it was new."""
    row = session.get(Connection, values["conn_id"])
    if row is None:
        session.add(Connection(**values, updated_at=now))
        return True
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_at = now
    return False


def connection(session: Session, conn_id: str) -> Connection | None:
    return session.get(Connection, conn_id)


def connections(session: Session) -> list[Connection]:
    return list(session.scalars(select(Connection).order_by(Connection.conn_id)))


def reencrypt(session: Session, rotate: Callable[[str], str]) -> tuple[int, int]:
    """Every stored secret passed through `rotate` (ledger.services.secrets.rotate: encrypted again with the first
    Fernet
    key): (variables, connections) changed."""
    rows = variables(session)
    for row in rows:
        row.value_encrypted = rotate(row.value_encrypted)
    conns = connections(session)
    for conn in conns:
        if conn.password_encrypted:
            conn.password_encrypted = rotate(conn.password_encrypted)
        if conn.extra_encrypted:
            conn.extra_encrypted = rotate(conn.extra_encrypted)
    return len(rows), len(conns)
