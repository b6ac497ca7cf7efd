from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class DagFile(Base):
    """A file of the DAGs folder and the hash of its content when it was last parsed."""

    __table__ = tables.dag_file

    fileloc: Mapped[str]
    content_hash: Mapped[str]
    last_parsed_at: Mapped[datetime]
    depends_on: Mapped[list[str] | None]
