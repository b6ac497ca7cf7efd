"""The declarative base of the mapped classes: their tables are ledger/models/tables.py's."""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from ledger.models.tables import UtcDateTime, metadata

__all__ = ["Base", "UtcDateTime"]


class Base(DeclarativeBase):
    metadata = metadata
