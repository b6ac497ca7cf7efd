"""`ledger audit verify` in the web view (/audit) and the API (/api/v1/audit/verify): admins only (403 otherwise),
read in the server's read-only session; the same report as the command (ledger/services/audit.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from ledger.services import audit
from ledger.services.users import Role
from ledger.web import auth
from ledger.web.actions import show
from ledger.web.guard import identity_of
from ledger.web.reading import MAX_ID, session_of

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api/v1", tags=["ledger"])

Dags = Annotated[list[str] | None, Query(description="Only these DAGs' chains (repeatable).")]
Since = Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only from this event on.")]


def _verified(request: Request, dag_id: list[str] | None, since: int | None) -> dict[str, Any]:
    auth.need(identity_of(request), Role.ADMIN, "verifying the history")
    with session_of(request) as session:
        report = audit.verify(session, dag_id or None, since=since)
    return {"ok": report.ok, "breaks": [b.line() for b in report.breaks],
            "notices": [b.line() for b in report.notices], "chains": report.chains,
            "events": report.events, "runs": report.runs, "blobs": report.blobs, "summary": report.summary()}


@pages.get("/audit", response_class=HTMLResponse)
def audit_page(request: Request, dag_id: Dags = None, since: Since = None) -> HTMLResponse:
    return show("audit.html", report=_verified(request, dag_id, since), dag_ids=dag_id or [], since=since)


@api.get("/audit/verify", summary="`ledger audit verify [DAG ...] [--since EVENT]` (admin): the breaks, one line each")
def audit_verify(request: Request, dag_id: Dags = None, since: Since = None) -> JSONResponse:
    return JSONResponse(_verified(request, dag_id, since))
