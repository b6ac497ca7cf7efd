"""Who is asking, and may they: the Host-header check, signed-in sessions (a signed cookie), API tokens, the
shared LEDGER_WEB_TOKEN, CSRF tokens for forms, and roles (ledger/services/users.py).

- With no user defined, anyone who reaches the server reads (a viewer), as before users existed; with
  LEDGER_WEB_TOKEN set, only with that token. Nobody can act: acting needs a user.
- With users defined, every page and API call needs a signed-in session (cookie `ledger_session`) or a user's
  API token (`Authorization: Bearer ldg_...`); the shared token still reads.
- A session cookie is `USER_ID.ISSUED.NONCE.SIGNATURE`: an HMAC over the user's id, when it was issued, a random
  nonce and the user's password hash, with the server's secret (LEDGER_WEB_SECRET, or random per process: then a
  restart signs everyone out). Deleting a user, or changing its password, ends its sessions; its role is read at
  each request.
  Signing out ends that session on the server too: its cookie's SHA-256 is kept (table ended_session) until
  the cookie would have expired, and a copy of it signs nobody in (decision 0352).
- A form carries the value of the `ledger_csrf` cookie in its hidden `csrf` field; a POST whose field does not
  match is refused (403). The write API with a session cookie needs the same value in `X-Ledger-CSRF`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.errors import LedgerError
from ledger.services import users
from ledger.services.users import Role
from ledger.store import users as user_store

SESSION_COOKIE = "ledger_session"
TOKEN_COOKIE = "ledger_token"
CSRF_COOKIE = "ledger_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-ledger-csrf"
SESSION_SECONDS = 12 * 3600
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
SECRET_VARIABLE = "LEDGER_WEB_SECRET"
HOSTS_VARIABLE = "LEDGER_WEB_ALLOWED_HOSTS"


@dataclass(frozen=True)
class Identity:
    """Who a request comes from: `name` is the actor recorded in the events of what it does."""

    name: str
    role: str
    by_cookie: bool = False  # a browser's cookie (its writes need the CSRF value), not an Authorization header

    def may(self, needed: Role) -> bool:
        return users.allows(self.role, needed)


ANONYMOUS = Identity("anonymous", Role.VIEWER.value)
# the identity, CSRF value and path of the request being answered, for the templates (account.html)
current: ContextVar[tuple[Identity, str, str] | None] = ContextVar("current", default=None)
ACTION_PAGES = re.compile(r"/(dags/[^/]+|runs/\d+|backfills/\d+)")


def account() -> dict[str, Any]:
    """What the account bar of a page shows: who is signed in, the CSRF value of its forms, and the page of
    actions on what the page shows (for an operator)."""
    found = current.get()
    identity, csrf, path = found if found is not None else (ANONYMOUS, "", "/")
    on = ACTION_PAGES.fullmatch(path)
    return {"name": identity.name, "role": identity.role, "anonymous": identity is ANONYMOUS, "csrf": csrf,
            "can_act": identity.may(Role.OPERATOR), "admin": identity.may(Role.ADMIN), "cookie": identity.by_cookie,
            "actions": f"/{on.group(1)}/actions" if on and identity.may(Role.OPERATOR) else None}


def allowed_hosts(env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The host names requests may name in their Host header: LEDGER_WEB_ALLOWED_HOSTS (comma-separated; `*`
    allows any) or the loopback names, and `extra` (the address the server binds, when it is one)."""
    raw = (os.environ if env is None else env).get(HOSTS_VARIABLE, "")
    named = [h.strip().lower() for h in raw.split(",") if h.strip()]
    return frozenset([*(named or LOOPBACK_NAMES), *(h.lower() for h in extra)])


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `[::1]:8793` -> `::1`, `Example.org:80` -> `example.org`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    return "*" in allowed or (header is not None and host_name(header) in allowed)


class Signer:
    """Session cookies signed with the server's secret."""

    def __init__(self, secret: str | None = None) -> None:
        self.key = (secret or os.environ.get(SECRET_VARIABLE) or secrets.token_hex(32)).encode()

    def _sign(self, user_id: int, issued: int, nonce: str, password_hash: str) -> str:
        return hmac.new(self.key, f"{user_id}.{issued}.{nonce}.{password_hash}".encode(), hashlib.sha256).hexdigest()

    def cookie(self, user_id: int, password_hash: str, *, now: float | None = None) -> str:
        """A new session's cookie; its nonce makes it its own, even beside another signed in the same second."""
        issued, nonce = int(time.time() if now is None else now), secrets.token_hex(8)
        return f"{user_id}.{issued}.{nonce}.{self._sign(user_id, issued, nonce, password_hash)}"

    def user_of(self, session: Session, cookie: str, *, now: float | None = None) -> Identity | None:
        """The signed-in user of a session cookie, or None (forged, expired, signed out, or its user gone or
        changed)."""
        return self.check(cookie, lambda user_id: user_store.by_id(session, user_id), now=now,
                          ended=lambda digest: user_store.session_ended(session, digest))

    def check(self, cookie: str, lookup: Callable[[int], Any], *, now: float | None = None,
              ended: Callable[[str], bool] | None = None) -> Identity | None:
        """user_of with the user looked up by `lookup` (an id -> the user or None) and signed-out sessions by
        `ended` (a cookie's digest -> whether its session was signed out; None: none was)."""
        parts = cookie.split(".")
        if len(parts) != 4 or not parts[0].isdigit() or not parts[1].isdigit() or len(parts[0]) > 18:
            return None
        user_id, issued = int(parts[0]), int(parts[1])
        if (time.time() if now is None else now) - issued > SESSION_SECONDS:
            return None
        user = lookup(user_id)
        if user is None or not hmac.compare_digest(parts[3], self._sign(user_id, issued, parts[2], user.password_hash)):
            return None
        if ended is not None and ended(cookie_digest(cookie)):
            return None
        return Identity(f"web:{user.username}", user.role, by_cookie=True)


def cookie_digest(cookie: str) -> str:
    """What is kept of a signed-out session's cookie: never the cookie itself."""
    return hashlib.sha256(cookie.encode()).hexdigest()


def expires_at(cookie: str) -> float:
    """When a well-formed session cookie expires (the epoch seconds of its issue plus SESSION_SECONDS)."""
    return int(cookie.split(".")[1]) + SESSION_SECONDS


def identify(session: Session, signer: Signer, *, bearer: str | None, cookie: str | None,
             token_cookie: str | None, shared_token: str | None) -> Identity | None:
    """Who a request comes from, or None when it must sign in (or bring a token) first. `bearer`: the token of
    an Authorization header; `token_cookie`: a token given on the sign-in page."""
    given = bearer if bearer is not None else token_cookie
    if given is not None:
        by_cookie = bearer is None
        if shared_token is not None and hmac.compare_digest(given.encode(), shared_token.encode()):
            return Identity("web:shared-token", Role.VIEWER.value, by_cookie=by_cookie)
        user = users.user_of_token(session, given)
        return None if user is None else Identity(f"api:{user.username}", user.role, by_cookie=by_cookie)
    if cookie is not None:
        found = signer.user_of(session, cookie)
        if found is not None:
            return found
    if shared_token is None and user_store.count(session) == 0:
        return ANONYMOUS
    return None


def csrf_matches(cookie: str | None, given: str | None) -> bool:
    return bool(cookie) and bool(given) and hmac.compare_digest(str(cookie).encode(), str(given).encode())


def new_csrf() -> str:
    return secrets.token_urlsafe(24)


class Forbidden(LedgerError):
    """The request's user may not do this (HTTP 403), or its form came without its CSRF value."""


def need(identity: Identity, role: Role, what: str) -> None:
    """Refuse (403) unless `identity` has at least `role`."""
    if not identity.may(role):
        who = "as nobody" if identity is ANONYMOUS else f"as {identity.name} ({identity.role})"
        raise Forbidden(f"{what} needs the {role.value} role; you are signed in {who}")
