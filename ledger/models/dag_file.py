from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class DagFile(Base):
    """A file of the DAGs folder and the hash of its content when it was last parsed."""

    __tablename__ = "dag_file"

    fileloc: Mapped[str] = mapped_column(Text, primary_key=True)
    content_hash: Mapped[str] = mapped_column(Text)
    last_parsed_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # the other files of the DAGs folder it imported (JSON list of paths): a change to one re-parses it
    depends_on: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
