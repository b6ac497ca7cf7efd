from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class ImportError_(Base):
    """The latest error of a DAG file that failed to load; removed once the file loads again."""

    __table__ = tables.import_error

    id: Mapped[int]
    fileloc: Mapped[str]
    error: Mapped[str]
    at: Mapped[datetime]
