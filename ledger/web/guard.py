"""What every request goes through before a route sees it, and every response after (ledger/web/auth.py has
the rules): the Host header is checked, the caller identified (or sent to sign in), HEAD is answered as GET
without a body, the CSRF cookie is handed out, and every response gets the security headers."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.datastructures import URL

from ledger.infra.config import Settings
from ledger.web import auth
from ledger.web.reading import Reader
from ledger.web.render import ENV, ZONE_COOKIE, chosen_zone, here, render, zone_choice

# pages load only their own scripts and styles: an escaping slip could not run a script
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
# Swagger UI (served from the package swagger-ui-py) sets style attributes on its elements
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
OPEN_PATHS = ("/login", "/static/")  # answered before signing in
WORKER_PREFIX = "/api/v1/worker/"  # what a Celery worker's credential (LEDGER_WORKER_TOKEN) opens, and nothing else
ENV.globals.update(account=auth.account)  # the account bar of every page (templates/account.html)


@dataclass
class Guard:
    reader: Reader
    settings: Settings
    token: str | None = None
    hosts: frozenset[str] | None = None
    secure_cookies: bool = False
    secret: str | None = None
    worker_token: str | None = None
    signer: auth.Signer = field(init=False)

    def __post_init__(self) -> None:
        self.signer = auth.Signer(self.secret)
        if self.hosts is None:
            self.hosts = auth.allowed_hosts()

    def identify(self, request: Request) -> auth.Identity | None:
        header = request.headers.get("authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else None
        with self.reader.session() as session:
            return auth.identify(session, self.signer, bearer=bearer,
                                 cookie=request.cookies.get(auth.SESSION_COOKIE),
                                 token_cookie=request.cookies.get(auth.TOKEN_COOKIE), shared_token=self.token)

    def set_cookie(self, response: Response, name: str, value: str, *, max_age: int | None = None) -> None:
        response.set_cookie(name, value, httponly=True, samesite="strict", secure=self.secure_cookies,
                            max_age=max_age, path="/")


def error(request: Request, status: int, message: str) -> Response:
    """An error as {"message": ...} under /api/, else as a page."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"message": message}, status_code=status)
    return HTMLResponse(render("error.html", status=status, message=message), status_code=status)


def guard_of(request: Request) -> Guard:
    found: Guard = request.app.state.guard
    return found


def identity_of(request: Request) -> auth.Identity:
    found: auth.Identity = request.state.identity
    return found


async def middleware(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    g = guard_of(request)
    assert g.hosts is not None
    # A worker names the webserver as its network does (`http://webserver:8793`), and its request is answered on
    # its token alone: the Host check keeps a browser's DNS-rebound page from reading as a loopback visitor, and
    # such a page holds no worker's token (decision 0358).
    if request.url.path.startswith(WORKER_PREFIX) and (g.worker_token is not None or g.token is not None):
        return _headers(request, await _for_a_worker(g, request, call_next))
    if not auth.host_allowed(request.headers.get("host"), g.hosts):
        response = error(request, 400, f"the Host header {request.headers.get('host', '')!r} is not one this "
                                       f"server answers to; name it in {auth.HOSTS_VARIABLE}")
        return _headers(request, response)
    head = request.method == "HEAD"
    if head:
        request.scope["method"] = "GET"
    path = request.url.path
    identity = None if path.startswith("/static/") else g.identify(request)
    csrf = request.cookies.get(auth.CSRF_COOKIE)
    fresh_csrf = csrf is None
    csrf = csrf or auth.new_csrf()
    if identity is None and not path.startswith(OPEN_PATHS):
        if path.startswith("/api/"):
            response = error(request, 401, "sign in first: send a user's API token as `Authorization: Bearer "
                                           "TOKEN` (`ledger users token NAME`), or LEDGER_WEB_TOKEN to read")
        else:
            response = RedirectResponse(str(URL("/login").include_query_params(next=_local(request))), 303)
    else:
        request.state.identity = identity or auth.ANONYMOUS
        request.state.csrf = csrf
        auth.current.set((request.state.identity, csrf, path))
        chosen_zone.set(zone_choice(request.cookies.get(ZONE_COOKIE)))
        here.set(_local(request))
        response = await call_next(request)
    if fresh_csrf and not path.startswith(("/api/", "/static/")):  # for the forms of pages
        g.set_cookie(response, auth.CSRF_COOKIE, csrf)
    if head:
        response = Response(b"", status_code=response.status_code, headers=dict(response.headers))
    return _headers(request, response)


async def _for_a_worker(g: Guard, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """A worker's request (a version's code): with LEDGER_WORKER_TOKEN or LEDGER_WEB_TOKEN as a bearer token."""
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if not any(t is not None and hmac.compare_digest(given.encode(), t.encode()) for t in (g.worker_token, g.token)):
        return error(request, 401, "a worker's token is needed: LEDGER_WORKER_TOKEN as `Authorization: Bearer TOKEN`")
    request.state.identity = auth.ANONYMOUS
    return await call_next(request)


def _local(request: Request) -> str:
    """The path and query of the request, for coming back to it after signing in."""
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def _headers(request: Request, response: Response) -> Response:
    response.headers["Content-Security-Policy"] = DOCS_CSP if request.url.path == "/api/docs" else CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
