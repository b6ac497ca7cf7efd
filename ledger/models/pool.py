from __future__ import annotations

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ledger.models.base import Base


class Pool(Base):
    """A named set of slots that limits how many task instances run at once across DAGs."""

    __tablename__ = "pool"

    name: Mapped[str] = mapped_column(String(250), primary_key=True)
    slots: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")
