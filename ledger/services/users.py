"""Web users: roles and what each may do, password hashes (argon2id), API tokens (random, kept as SHA-256).

Roles grow: a viewer reads; an operator also acts on runs, DAGs and backfills; an admin also manages users,
variables, connections and pools. Every change is recorded as an event naming who made it."""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime
from enum import StrEnum
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.orm import Session

from ledger.core.errors import InvalidInput, NotFound
from ledger.models import WebUser
from ledger.store import events
from ledger.store import users as user_store


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}
USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
MIN_PASSWORD = 8
TOKEN_PREFIX = "ldg_"

_hasher = PasswordHasher()


def allows(role: str, needed: Role) -> bool:
    """Whether a user of `role` may do what needs `needed`."""
    return role in RANK and RANK[Role(role)] >= RANK[needed]


def role_of(text: str) -> Role:
    try:
        return Role(text)
    except ValueError:
        raise InvalidInput(f"no role {text!r}: viewer, operator or admin") from None


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
    return _hasher.hash(password)


def password_matches(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def token_digest(token: str) -> str:
    """What is stored of an API token: its SHA-256 (a token is 32 random bytes, so no slow hash is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def get(session: Session, username: str) -> WebUser:
    user = user_store.find(session, username)
    if user is None:
        raise NotFound(f"no user named {username!r}; see `ledger users list`")
    return user


def check_username(username: str) -> str:
    if not USERNAME.fullmatch(username):
        raise InvalidInput(f"user name {username!r} must be letters, digits, '.', '_', '@' or '-' (at most 100)")
    return username


def check_token_name(name: str) -> str:
    if not USERNAME.fullmatch(name):
        raise InvalidInput(f"token name {name!r} must be letters, digits, '.', '_', '@' or '-'")
    return name


def create(session: Session, username: str, password: str, role: str, *, now: datetime, actor: str) -> WebUser:
    check_username(username)
    chosen = role_of(role)
    if user_store.find(session, username) is not None:
        raise InvalidInput(f"user {username!r} exists already; `ledger users set-role` changes its role")
    user = user_store.add(session, username, hash_password(password), chosen.value, now=now)
    events.record(session, "user_created", at=now, actor=actor, user=username, role=chosen.value)
    return user


def delete(session: Session, username: str, *, now: datetime, actor: str) -> None:
    user = get(session, username)
    user_store.delete(session, user)
    events.record(session, "user_deleted", at=now, actor=actor, user=username)


def set_role(session: Session, username: str, role: str, *, now: datetime, actor: str) -> str:
    """Change a user's role; returns the role it had."""
    user, chosen = get(session, username), role_of(role)
    before = user.role
    if before == chosen.value:
        raise InvalidInput(f"user {username!r} is already {before}")
    user.role = chosen.value
    changed: dict[str, Any] = {"from": before, "to": chosen.value}
    events.record(session, "user_role_set", at=now, actor=actor, user=username, **changed)
    return before


def new_token(session: Session, username: str, name: str, *, now: datetime, actor: str) -> str:
    """A new API token for the user: returned once, only its SHA-256 is kept."""
    user = get(session, username)
    check_token_name(name)
    if any(t.name == name for t in user_store.tokens(session, user)):
        raise InvalidInput(f"user {username!r} has a token named {name!r} already; revoke it first")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    user_store.add_token(session, user, name, token_digest(token), now=now)
    events.record(session, "api_token_created", at=now, actor=actor, user=username, token=name)
    return token


def revoke_token(session: Session, username: str, name: str, *, now: datetime, actor: str) -> None:
    if not user_store.revoke_token(session, get(session, username), name):
        raise NotFound(f"user {username!r} has no token named {name!r}")
    events.record(session, "api_token_revoked", at=now, actor=actor, user=username, token=name)


def user_of_token(session: Session, token: str) -> WebUser | None:
    return user_store.by_token(session, token_digest(token)) if token.startswith(TOKEN_PREFIX) else None


def sign_in(session: Session, username: str, password: str) -> WebUser | None:
    """The user when the password is theirs, else None (the same answer for an unknown name)."""
    user = user_store.find(session, username)
    if user is None:
        _hasher.hash(password or "x")  # as slow as a real check: the answer time does not tell who exists
        return None
    return user if password_matches(user.password_hash, password) else None
