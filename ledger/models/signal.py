"""Signals, the newest version of each key, and what each listener has been given.

`signal_key` is a counter, one row per key: sending takes the next version by incrementing it
(an upsert with RETURNING), which also locks that row until commit, so the versions of a key are
handed out and committed in order, without gaps, even by concurrent processes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class SignalRecord(Base):
    """One signal: the `version`-th message sent on `key` (append-only)."""

    __table__ = tables.signal

    id: Mapped[int]
    key: Mapped[str]
    version: Mapped[int]
    value: Mapped[str]
    sender: Mapped[str]
    sent_at: Mapped[datetime]
    meta: Mapped[dict[str, Any] | None]


class SignalKey(Base):
    """The newest version of a key: the counter that hands out versions."""

    __table__ = tables.signal_key

    key: Mapped[str]
    version: Mapped[int]


class SignalCursor(Base):
    """The last version of `key` delivered to `listener` (only ever moves forward)."""

    __table__ = tables.signal_cursor

    listener: Mapped[str]
    key: Mapped[str]
    version: Mapped[int]
    updated_at: Mapped[datetime]
