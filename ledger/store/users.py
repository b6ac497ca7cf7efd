"""Web users, their API tokens and the sessions they signed out of (tables web_user, api_token, ended_session)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from ledger.models import ApiToken, WebUser, tables

ENDED = tables.ended_session


def find(session: Session, username: str) -> WebUser | None:
    return session.scalars(select(WebUser).where(WebUser.username == username)).first()


def by_id(session: Session, user_id: int) -> WebUser | None:
    return session.get(WebUser, user_id)


def listing(session: Session) -> list[tuple[WebUser, int]]:
    """Every user with how many API tokens it has, by name."""
    counts = (select(ApiToken.user_id, func.count().label("n")).group_by(ApiToken.user_id).subquery())
    rows = session.execute(select(WebUser, func.coalesce(counts.c.n, 0)).outerjoin(counts, counts.c.user_id ==
                                                                                   WebUser.id)
                           .order_by(WebUser.username)).tuples().all()
    return [(u, int(n)) for u, n in rows]


def count(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(WebUser)) or 0)


def add(session: Session, username: str, password_hash: str, role: str, *, now: datetime) -> WebUser:
    user = WebUser(username=username, password_hash=password_hash, role=role, created_at=now)
    session.add(user)
    session.flush()
    return user


def delete(session: Session, user: WebUser) -> None:
    for token in session.scalars(select(ApiToken).where(ApiToken.user_id == user.id)):
        session.delete(token)
    session.delete(user)


def add_token(session: Session, user: WebUser, name: str, sha256: str, *, now: datetime) -> ApiToken:
    token = ApiToken(user_id=user.id, name=name, token_sha256=sha256, created_at=now)
    session.add(token)
    session.flush()
    return token


def tokens(session: Session, user: WebUser) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)))


def revoke_token(session: Session, user: WebUser, name: str) -> bool:
    """False when the user has no token of that name."""
    found = session.scalars(select(ApiToken).where(ApiToken.user_id == user.id, ApiToken.name == name)).first()
    if found is None:
        return False
    session.delete(found)
    return True


def by_token(session: Session, sha256: str) -> WebUser | None:
    """The user whose token has this SHA-256."""
    return session.scalars(select(WebUser).join(ApiToken, ApiToken.user_id == WebUser.id)
                           .where(ApiToken.token_sha256 == sha256)).first()


def end_session(session: Session, digest: str, *, expires_at: datetime, now: datetime) -> None:
    """Keep a signed-out session's cookie (its SHA-256) until it would have expired; forget those past it."""
    session.execute(sa.delete(ENDED).where(ENDED.c.expires_at < now))
    if not session_ended(session, digest):
        session.execute(insert(ENDED).values(digest=digest, expires_at=expires_at))


def session_ended(session: Session, digest: str) -> bool:
    return session.scalar(select(ENDED.c.digest).where(ENDED.c.digest == digest)) is not None
