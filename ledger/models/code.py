from __future__ import annotations

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class CodeBlob(Base):
    """One distinct file content of a DAG version's code, stored once: keyed by the sha256 of its bytes,
    kept zlib-compressed."""

    __table__ = tables.code_blob

    sha256: Mapped[str]
    size: Mapped[int]
    data: Mapped[bytes]


class CodeBundle(Base):
    """The modules and packages of the DAGs folder that DAG files import, as a manifest of relative path ->
    blob sha256 (canonical JSON text), keyed by the sha256 of that text: DAGs that import the same helpers
    share one bundle."""

    __table__ = tables.code_bundle

    bundle_hash: Mapped[str]
    manifest: Mapped[str]
