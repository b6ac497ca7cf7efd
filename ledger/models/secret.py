from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Variable(Base):
    """A named value for DAGs (`{{ var.value.NAME }}`), stored encrypted (Fernet, LEDGER_FERNET_KEY)."""

    __table__ = tables.variable

    key: Mapped[str]
    value_encrypted: Mapped[str]
    description: Mapped[str]
    updated_at: Mapped[datetime]


class Connection(Base):
    """How to reach a system (`{{ conn.NAME.host }}`); its password and extra are stored encrypted."""

    __table__ = tables.connection

    conn_id: Mapped[str]
    conn_type: Mapped[str]
    host: Mapped[str | None]
    port: Mapped[int | None]
    login: Mapped[str | None]
    schema: Mapped[str | None]
    password_encrypted: Mapped[str | None]
    extra_encrypted: Mapped[str | None]
    description: Mapped[str]
    updated_at: Mapped[datetime]
