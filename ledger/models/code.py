from __future__ import annotations

from sqlalchemy import Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base


class CodeBlob(Base):
    """One distinct file content of a DAG version's code, stored once: keyed by the sha256 of its bytes,
    kept zlib-compressed."""

    __tablename__ = "code_blob"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(Integer)  # bytes before compression
    data: Mapped[bytes] = mapped_column(LargeBinary)


class CodeBundle(Base):
    """The modules and packages of the DAGs folder that DAG files import, as a manifest of relative path ->
    blob sha256 (canonical JSON text), keyed by the sha256 of that text: DAGs that import the same helpers
    share one bundle."""

    __tablename__ = "code_bundle"

    bundle_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    manifest: Mapped[str] = mapped_column(Text)
