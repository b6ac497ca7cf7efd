"""The FastAPI application: the token check, security headers, errors as JSON or HTML (its read-only
sessions are in reading.py)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from ledger.config import Settings
from ledger.errors import LedgerError
from ledger.web import api, pages
from ledger.web.reading import Reader
from ledger.web.render import compile_templates, render

STATIC = Path(__file__).resolve().parent / "static"
TOKEN_COOKIE = "ledger_token"
# pages load only their own scripts and styles: an escaping slip could not run a script
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


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
    app = FastAPI(title="ledger", summary="The read-only JSON API of the ledger: the same documents as "
                  "`ledger ... --json`.", docs_url="/api/docs", redoc_url=None, openapi_url="/api/openapi.json")
    app.state.reader = Reader(settings)
    app.state.settings = settings
    compile_templates()

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
