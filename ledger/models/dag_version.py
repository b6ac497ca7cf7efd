from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base, UtcDateTime


class DagVersion(Base):
    """A DAG's canonical structure (JSON text) and its sha256; written only when the hash changes."""

    __tablename__ = "dag_version"
    __table_args__ = (UniqueConstraint("dag_id", "version_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(250), ForeignKey("dag.dag_id"), index=True)
    version_hash: Mapped[str] = mapped_column(String(64))
    structure: Mapped[str] = mapped_column(Text)
    # the DAG file's text when this version was registered (None for DAGs not loaded from a file)
    source_code: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the version's code (ledger/infra/code.py): the DAG file's path in the DAGs folder and its blob, the bundle of
    # the helper modules it imports, and the key of the whole snapshot. All None for versions registered
    # before code was captured: those run from `source_code` alone.
    code_entry: Mapped[str | None] = mapped_column(Text, nullable=True)
    code_entry_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    code_bundle: Mapped[str | None] = mapped_column(String(64), nullable=True)
    code_snapshot: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
