"""The admin pages: users (list, create, set role, delete), variables and connections (list, set, delete; a
secret is never shown: a connection's password and extra and a variable whose name says it is a secret are ***),
pools (list, set, delete). For the admin role only (403 otherwise, and no links); every form carries its CSRF
token; each change goes through the operations the CLI runs (ledger/services/users.py, ledger/services/operations.py)
with the
user as the actor of its event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from ledger.core.dates import iso
from ledger.core.errors import ConfigError, InvalidInput, NotFound
from ledger.core.secret_names import sensitive
from ledger.infra.fernet import decrypt
from ledger.services import operations
from ledger.services import users as user_rules
from ledger.services.users import Role
from ledger.store import pools as pool_store
from ledger.store import secrets as secret_store
from ledger.store import users as user_store
from ledger.web import auth
from ledger.web.actions import Form, back_to, show, writing
from ledger.web.guard import identity_of
from ledger.web.reading import MAX_ID, now, session_of

pages = APIRouter(include_in_schema=False)
MASK = "***"


def _admin(request: Request, what: str) -> str:
    """The actor of an admin's change (or a read of an admin page): refused (403) below the admin role."""
    identity = identity_of(request)
    auth.need(identity, Role.ADMIN, what)
    return identity.name


def _not_yourself(request: Request, username: str, what: str) -> None:
    """An admin does not delete or demote itself here (nobody could undo it from a browser)."""
    if identity_of(request).name.split(":", 1)[-1] == username:
        raise InvalidInput(f"you cannot {what} your own user {username!r} here; another admin, or `ledger users`, "
                           "can")


def variable_value(key: str, sealed: str) -> str:
    """A variable's value as the page shows it: *** when its name says it is a secret
    (ledger.core.secret_names.sensitive,
    as a try's log masks it), else in clear."""
    if sensitive(key):
        return MASK
    try:
        return decrypt(sealed)
    except ConfigError as exc:
        return f"(not shown: {exc})"


def _users(session: Session) -> list[dict[str, Any]]:
    return [{"username": u.username, "role": u.role, "tokens": n, "created_at": iso(u.created_at)}
            for u, n in user_store.listing(session)]


def _variables(session: Session) -> list[dict[str, Any]]:
    return [{"key": v.key, "value": variable_value(v.key, v.value_encrypted), "description": v.description,
             "updated_at": iso(v.updated_at)} for v in secret_store.variables(session)]


def _connections(session: Session) -> list[dict[str, Any]]:
    return [operations.connection_json(c) for c in secret_store.connections(session)]


# each admin page: what it lists (its template is admin_NAME.html)
LISTS: dict[str, Callable[[Session], list[dict[str, Any]]]] = {
    "users": _users, "variables": _variables, "connections": _connections, "pools": pool_store.pool_rows}


@pages.get("/admin/{name}", response_class=HTMLResponse)
def admin_page(request: Request, name: str) -> HTMLResponse:
    if name not in LISTS:
        raise NotFound(f"no page /admin/{name}")
    _admin(request, f"managing {name}")
    with session_of(request) as session:
        rows = LISTS[name](session)
    return show(f"admin_{name}.html", rows=rows, roles=[r.value for r in Role])


# --- users -----------------------------------------------------------------------------------------------------

@pages.post("/admin/users")
def create_user(request: Request, form: Form) -> Response:
    actor = _admin(request, "creating a user")
    with writing(request) as session:
        user_rules.create(session, form.get("username", "").strip(), form.get("password", ""),
                          form.get("role", ""), now=now(), actor=actor)
    return back_to("/admin/users")


def _change_user(request: Request, username: str, what: str, verb: str,
                 change: Callable[[Session, str], Any]) -> Response:
    """Change another user (`change(session, actor)`): an admin does not change itself here (_not_yourself)."""
    actor = _admin(request, what)
    _not_yourself(request, username, verb)
    with writing(request) as session:
        change(session, actor)
    return back_to("/admin/users")


@pages.post("/admin/users/{username}/role")
def set_role(request: Request, username: str, form: Form) -> Response:
    return _change_user(request, username, "changing a user's role", "change the role of",
                        lambda s, actor: user_rules.set_role(s, username, form.get("role", ""), now=now(), actor=actor))


@pages.post("/admin/users/{username}/delete")
def delete_user(request: Request, username: str, form: Form) -> Response:
    return _change_user(request, username, "deleting a user", "delete",
                        lambda s, actor: user_rules.delete(s, username, now=now(), actor=actor))


# --- variables and connections -----------------------------------------------------------------------------------

@pages.post("/admin/variables")
def set_variable(request: Request, form: Form) -> Response:
    actor = _admin(request, "setting a variable")
    with writing(request) as session:
        operations.set_variable(session, form.get("key", "").strip(), form.get("value", ""),
                                form.get("description", "").strip(), now=now(), actor=actor)
    return back_to("/admin/variables")


@pages.post("/admin/connections")
def set_connection(request: Request, form: Form) -> Response:
    actor = _admin(request, "setting a connection")
    with writing(request) as session:
        operations.set_connection(session, form.get("conn_id", "").strip(), form.get("uri", "").strip(),
                                  form.get("description", "").strip(), now=now(), actor=actor)
    return back_to("/admin/connections")


def _delete_secret(request: Request, kind: str, name: str) -> Response:
    actor = _admin(request, f"deleting a {kind}")
    with writing(request) as session:
        operations.delete_secret(session, kind, name, now=now(), actor=actor)
    return back_to(f"/admin/{kind}s")


@pages.post("/admin/variables/{key}/delete")
def delete_variable(request: Request, key: str, form: Form) -> Response:
    return _delete_secret(request, "variable", key)


@pages.post("/admin/connections/{conn_id}/delete")
def delete_connection(request: Request, conn_id: str, form: Form) -> Response:
    return _delete_secret(request, "connection", conn_id)


# --- pools ---------------------------------------------------------------------------------------------------------

@pages.post("/admin/pools")
def set_pool(request: Request, form: Form) -> Response:
    actor = _admin(request, "setting a pool")
    name, raw = form.get("name", "").strip(), form.get("slots", "").strip()
    if not name:
        raise InvalidInput("a pool needs a name")
    if not (raw.isdigit() and int(raw) <= MAX_ID):
        raise InvalidInput(f"slots must be 0 or more, up to {MAX_ID}, not {raw!r}")
    with writing(request) as session:
        operations.set_pool(session, name, int(raw), form.get("description", "").strip(), now=now(), actor=actor)
    return back_to("/admin/pools")


@pages.post("/admin/pools/{name}/delete")
def delete_pool(request: Request, name: str, form: Form) -> Response:
    actor = _admin(request, "deleting a pool")
    with writing(request) as session:
        operations.delete_pool(session, name, now=now(), actor=actor)
    return back_to("/admin/pools")
