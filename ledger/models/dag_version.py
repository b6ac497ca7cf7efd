from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class DagVersion(Base):
    """A DAG's canonical structure (JSON text) and its sha256; written only when the hash changes."""

    __table__ = tables.dag_version

    id: Mapped[int]
    dag_id: Mapped[str]
    version_hash: Mapped[str]
    structure: Mapped[str]
    source_code: Mapped[str | None]
    code_entry: Mapped[str | None]
    code_entry_sha256: Mapped[str | None]
    code_bundle: Mapped[str | None]
    code_snapshot: Mapped[str | None]
    created_at: Mapped[datetime]
