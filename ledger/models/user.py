from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Mapped

from ledger.models import tables
from ledger.models.base import Base


class WebUser(Base):
    """Someone who signs in to the web view: a role (viewer, operator, admin) and an argon2 password hash."""

    __table__ = tables.web_user

    id: Mapped[int]
    username: Mapped[str]
    password_hash: Mapped[str]
    role: Mapped[str]
    created_at: Mapped[datetime]


class ApiToken(Base):
    """A user's token for scripts: only its SHA-256 is kept; it acts with its user's role."""

    __table__ = tables.api_token

    id: Mapped[int]
    user_id: Mapped[int]
    name: Mapped[str]
    token_sha256: Mapped[str]
    created_at: Mapped[datetime]
