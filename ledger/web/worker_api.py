"""Variables and connections for tries running on Celery workers, which hold no database credentials: read-only,
one name at a time, with the workers' own credential (LEDGER_WORKER_TOKEN) and no other, decrypted here with the
webserver's Fernet key. The task side (ledger/services/secrets.py) asks here when it runs on a worker; the values it
reads
are masked in its log as any try's are."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ledger.core.errors import NotFound
from ledger.services.secrets import decrypt
from ledger.store import secrets as secret_store
from ledger.web.auth import Forbidden
from ledger.web.reading import session_of

router = APIRouter(prefix="/api/v1/worker", tags=["workers"])


def _worker_only(request: Request) -> None:
    """Secrets go only to a request that carries LEDGER_WORKER_TOKEN (not the shared read token, LEDGER_WEB_TOKEN,
    which opens the worker's code paths too: a reader of the web view must not read secrets), and only from a
    server that has one."""
    expected = request.app.state.guard.worker_token
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if expected is None:
        raise Forbidden("this server has no LEDGER_WORKER_TOKEN: it serves variables and connections to no one")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Forbidden("variables and connections are served with LEDGER_WORKER_TOKEN only")


@router.get("/variables/{key}", summary="A variable's value, for a try on a worker (LEDGER_WORKER_TOKEN only)")
def variable(request: Request, key: str) -> JSONResponse:
    _worker_only(request)
    with session_of(request) as session:
        row = secret_store.variable(session, key)
        encrypted = row.value_encrypted if row is not None else None
    if encrypted is None:
        raise NotFound(f"variable {key!r} is not set (ledger variables set)")
    return JSONResponse({"key": key, "value": decrypt(encrypted)})


@router.get("/connections/{conn_id}", summary="A connection, for a try on a worker (LEDGER_WORKER_TOKEN only)")
def connection(request: Request, conn_id: str) -> JSONResponse:
    _worker_only(request)
    with session_of(request) as session:
        row = secret_store.connection(session, conn_id)
        if row is None:
            raise NotFound(f"connection {conn_id!r} is not defined (ledger connections add)")
        found = {"conn_id": row.conn_id, "conn_type": row.conn_type, "host": row.host, "port": row.port,
                 "login": row.login, "schema": row.schema}
        password, extra = row.password_encrypted, row.extra_encrypted
    return JSONResponse({**found, "password": decrypt(password) if password else None,
                         "extra": decrypt(extra) if extra else None})
