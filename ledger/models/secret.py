from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class Variable(Base):
    """A named value for DAGs (`{{ var.value.NAME }}`), stored encrypted (Fernet, LEDGER_FERNET_KEY)."""

    __tablename__ = "variable"

    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value_encrypted: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Connection(Base):
    """How to reach a system (`{{ conn.NAME.host }}`); its password and extra are stored encrypted."""

    __tablename__ = "connection"

    conn_id: Mapped[str] = mapped_column(String(250), primary_key=True)
    conn_type: Mapped[str] = mapped_column(String(100))
    host: Mapped[str | None] = mapped_column(String(500))
    port: Mapped[int | None] = mapped_column(Integer)
    login: Mapped[str | None] = mapped_column(String(500))
    schema: Mapped[str | None] = mapped_column(String(500))
    password_encrypted: Mapped[str | None] = mapped_column(Text)
    extra_encrypted: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
