"""The FastAPI application: read-only sessions, the token check, security headers, errors as JSON or HTML."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path as FilePath
from typing import Annotated

import pendulum
from fastapi import FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pendulum import DateTime
from sqlalchemy.orm import Session, sessionmaker

from ledger.config import Settings
from ledger.db import ensure_ready, make_read_engine, make_sessions
from ledger.errors import InvalidInput, LedgerError
from ledger.web.render import render

STATIC = FilePath(__file__).resolve().parent / "static"
TOKEN_COOKIE = "ledger_token"
# pages load only their own scripts and styles: an escaping slip could not run a script
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


class Reader:
    """Read-only sessions on the ledger's database, on the engine of the CLI's read commands: on SQLite a
    connection opened read-only (it never takes the write lock), on PostgreSQL READ ONLY transactions."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        engine = make_read_engine(settings.database_url)
        ensure_ready(settings.database_url, engine)  # once: a server on a database that is not ready refuses
        self.sessions: sessionmaker[Session] = make_sessions(engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        session = self.sessions()
        try:
            yield session
        finally:
            session.close()  # ends the transaction without a commit


def session_of(request: Request) -> AbstractContextManager[Session]:
    """A read-only session for one request."""
    db: Reader = request.app.state.reader
    return db.session()


def now() -> DateTime:
    return pendulum.now("UTC")


# ids are 64-bit integers (BIGINT), the first one 1: an id in a URL outside that range is refused (400), never
# given to the database (whose driver would raise: a 500)
MAX_ID = 2**63 - 1
IdInUrl = Annotated[int, Path(ge=1, le=MAX_ID)]


def id_in_url(text: str, what: str = "run id") -> int:
    """An id written in a URL as text: a whole number from 1 to MAX_ID, else InvalidInput (400)."""
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{what} must be a number, got {text!r}") from None
    if not 1 <= value <= MAX_ID:
        raise InvalidInput(f"{what} {value} is out of range: ids go from 1 to {MAX_ID}")
    return value


def status_of(exc: LedgerError) -> int:
    return 404 if isinstance(exc, LookupError) else 400


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _error(request: Request, status: int, message: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"message": message}, status_code=status)
    return HTMLResponse(render("error.html", status=status, message=message), status_code=status)


def create_app(settings: Settings, *, token: str | None = None) -> FastAPI:
    """The web application on the database of `settings`; with `token`, every request must carry it (an
    `Authorization: Bearer` header, the `ledger_token` cookie, or `?token=` once, which sets the cookie)."""
    from ledger.web import api, pages

    app = FastAPI(title="ledger", summary="The read-only JSON API of the ledger: the same documents as "
                  "`ledger ... --json`.", docs_url="/api/docs", redoc_url=None, openapi_url="/api/openapi.json")
    app.state.reader = Reader(settings)
    app.state.settings = settings

    @app.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> Response:
        return _error(request, status_of(exc), " ".join(str(exc).split()))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
        return _error(request, 400, f"invalid {where or 'request'}: {first.get('msg', 'bad value')}")

    @app.exception_handler(404)
    async def not_found(request: Request, _exc: Exception) -> Response:
        return _error(request, 404, f"no page {request.url.path}")

    @app.exception_handler(405)
    async def not_allowed(request: Request, _exc: Exception) -> Response:
        return _error(request, 405, "the web view is read-only: only GET requests")

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = None
        if token is not None:
            auth = request.headers.get("authorization", "")
            given = (auth[7:] if auth.lower().startswith("bearer ") else None) \
                or request.cookies.get(TOKEN_COOKIE) or request.query_params.get("token")
            if given is None or not hmac.compare_digest(given.encode(), token.encode()):
                return _error(request, 401, "a token is needed: LEDGER_WEB_TOKEN as `Authorization: Bearer "
                                            "TOKEN`, or open the page once with ?token=TOKEN")
        response = await call_next(request)
        if token is not None and request.query_params.get("token") == given:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        if not request.url.path.startswith("/api/docs"):  # Swagger UI loads its scripts from a CDN
            response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(api.router)
    app.include_router(pages.router)
    return app
