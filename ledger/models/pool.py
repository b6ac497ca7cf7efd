from __future__ import annotations

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class Pool(Base):
    """A named set of slots that limits how many task instances run at once across DAGs."""

    __table__ = tables.pool

    name: Mapped[str]
    slots: Mapped[int]
    description: Mapped[str]
