from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class DagFile(Base):
    """A file of the DAGs folder and the hash of its content when it was last parsed."""

    __tablename__ = "dag_file"

    fileloc: Mapped[str] = mapped_column(Text, primary_key=True)
    content_hash: Mapped[str] = mapped_column(Text)
    last_parsed_at: Mapped[datetime] = mapped_column(UtcDateTime)
