"""Signals, the newest version of each key, and what each listener has been given.

`signal_key` is a counter, one row per key: sending takes the next version by incrementing it
(an upsert with RETURNING), which also locks that row until commit, so the versions of a key are
handed out and committed in order, without gaps, even by concurrent processes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class SignalRecord(Base):
    """One signal: the `version`-th message sent on `key` (append-only)."""

    __tablename__ = "signal"
    # the unique constraint's index (key, version) serves every lookup by key and version range
    __table_args__ = (UniqueConstraint("key", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    value: Mapped[str] = mapped_column(Text)
    sender: Mapped[str] = mapped_column(String(250))
    sent_at: Mapped[datetime] = mapped_column(UtcDateTime)
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)


class SignalKey(Base):
    """The newest version of a key: the counter that hands out versions."""

    __tablename__ = "signal_key"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class SignalCursor(Base):
    """The last version of `key` delivered to `listener` (only ever moves forward)."""

    __tablename__ = "signal_cursor"

    listener: Mapped[str] = mapped_column(String(250), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
