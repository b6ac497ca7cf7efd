"""The FastAPI application: its guard (guard.py), errors as JSON or HTML, the routes (api.py and pages.py read,
actions.py acts; the read-only sessions are in reading.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.orm import configure_mappers
from starlette.concurrency import run_in_threadpool

from ledger.core.errors import LedgerError, TimelineConflict
from ledger.infra.config import Settings
from ledger.web import actions, admin, api, audit, guard, pages, swagger, viewer_zone, worker_api
from ledger.web.auth import Forbidden
from ledger.web.guard import error
from ledger.web.reading import Reader
from ledger.web.render import compile_templates

STATIC = Path(__file__).resolve().parent / "static"
UNANSWERED = "/-/start"  # a path no route answers: asking it at start walks every route


async def _walk_routes(app: FastAPI) -> None:
    """Ask the application's router (not its middleware: nothing is read or checked) for a path no route answers,
    so that it matches the path against every route once: FastAPI analyses a route's parameters the first time the
    route is matched (a pydantic validator per parameter, for the ~100 routes), which the first request after a
    start would otherwise pay."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": UNANSWERED, "raw_path": UNANSWERED.encode(), "root_path": "", "query_string": b"",
             "headers": [(b"host", b"localhost")], "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0)}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: MutableMapping[str, Any]) -> None:
        return None

    await app.router(scope, receive, send)


@asynccontextmanager
async def _started(app: FastAPI) -> AsyncIterator[None]:
    """What a server does once before its first request (a first request would pay each of them otherwise): the
    ORM's mappers configured in a worker thread as a page's reads are (which loads anyio's event loop backend and
    starts the thread pool the pages run in), every route analysed; the templates are compiled by create_app."""
    await run_in_threadpool(configure_mappers)
    await _walk_routes(app)
    yield


def status_of(exc: LedgerError) -> int:
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, TimelineConflict):
        return 409
    return 404 if isinstance(exc, LookupError) else 400


def create_app(settings: Settings, *, token: str | None = None, hosts: frozenset[str] | None = None,
               secure_cookies: bool = False, secret: str | None = None, worker_token: str | None = None) -> FastAPI:
    """The web application on the database of `settings` (who may do what: ledger/web/guard.py). `token`: the
    shared read token (LEDGER_WEB_TOKEN); `hosts`: the names the Host header may give (default: from
    LEDGER_WEB_ALLOWED_HOSTS, else loopback names); `secure_cookies`: cookies only over HTTPS; `worker_token`
    (LEDGER_WORKER_TOKEN): the Celery workers' credential, which opens only /api/v1/worker/ (a version's code, variables
    and connections)."""
    app = FastAPI(title="ledger", summary="The JSON API of the ledger: the same documents as `ledger ... --json`, "
                  "and the operator's actions (POST, with a user's API token).", docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json", lifespan=_started)
    app.state.reader = Reader(settings)
    app.state.settings = settings
    app.state.stale_after = actions.stale_after()
    compile_templates()

    @app.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> Response:
        return error(request, status_of(exc), " ".join(str(exc).split()))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
        return error(request, 400, f"invalid {where or 'request'}: {first.get('msg', 'bad value')}")

    @app.exception_handler(404)
    async def not_found(request: Request, _exc: Exception) -> Response:
        return error(request, 404, f"no page {request.url.path}")

    @app.exception_handler(405)
    async def not_allowed(request: Request, _exc: Exception) -> Response:
        return error(request, 405, f"{request.method} is not answered at {request.url.path}")

    app.middleware("http")(guard.middleware)
    app.state.guard = guard.Guard(reader=app.state.reader, settings=settings, token=token, hosts=hosts,
                                  secure_cookies=secure_cookies, secret=secret, worker_token=worker_token)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(api.router)
    app.include_router(worker_api.router)
    app.include_router(actions.api)
    app.include_router(actions.pages)
    app.include_router(admin.pages)
    app.include_router(audit.pages)
    app.include_router(audit.api)
    app.include_router(swagger.router)
    app.include_router(viewer_zone.router)
    app.include_router(pages.router)
    return app
