from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class ImportError_(Base):
    """The latest error of a DAG file that failed to load; removed once the file loads again."""

    __tablename__ = "import_error"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fileloc: Mapped[str] = mapped_column(Text, unique=True)
    error: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(UtcDateTime)
