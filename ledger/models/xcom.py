from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class XCom(Base):
    """A value a try passed on (its return value, or context.xcom_push): kept per try, with its run, so an
    overridden run keeps the values its tries made."""

    __table__ = tables.xcom

    id: Mapped[int]
    run_id: Mapped[int]
    task_id: Mapped[str]
    map_index: Mapped[int]
    try_number: Mapped[int]
    key: Mapped[str]
    value: Mapped[Any]
    created_at: Mapped[datetime]
