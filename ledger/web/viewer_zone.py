"""The viewer's choice of the zone the pages print times in: each DAG's own, UTC, or the viewer's (the zone its
browser reports, sent by static/live.js, or one chosen from the list of `/timezone`). Kept in the `ledger_tz`
cookie, read for each request (ledger/web/guard.py) by the `when` filter of ledger/web/render.py: one format per
page. A display preference: it changes nothing in the ledger, so a viewer may set it too (with the form's CSRF
value, like every form)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from ledger.core.errors import InvalidInput
from ledger.web import forms
from ledger.web.actions import Form
from ledger.web.guard import guard_of
from ledger.web.render import DAG_ZONE, UTC_ZONE, ZONE_COOKIE, chosen_zone, known_zones, render

router = APIRouter(include_in_schema=False)
YEAR = 365 * 24 * 3600
MINE = "mine"  # the browser's own zone, in the form's `browser` field


@router.get("/timezone", response_class=HTMLResponse)
def zone_page(request: Request, to: str = "/") -> HTMLResponse:
    """Every zone to choose from, for a browser that runs no script (or a zone other than its own)."""
    return HTMLResponse(render("timezone.html", zones=sorted(known_zones()), chosen=chosen_zone.get(),
                               back=forms.local_target(to)))


@router.post("/timezone")
def choose_zone(request: Request, form: Form) -> RedirectResponse:
    """Keep the zone chosen (`dag`, `utc`, `mine` with the browser's zone in `browser`, or a zone name) in the
    cookie and go back to the page the form was on (`to`); an unknown zone is refused (400) and changes nothing."""
    zone = form.get("zone", "").strip()
    if zone == MINE:
        zone = form.get("browser", "").strip()
        if not zone:
            raise InvalidInput("your browser did not say its time zone: choose one from the list at /timezone")
    if zone not in (DAG_ZONE, UTC_ZONE) and zone not in known_zones():
        raise InvalidInput(f"unknown time zone {zone!r}: give an IANA name like Europe/Berlin (the list is at "
                           "/timezone), dag or utc")
    response = RedirectResponse(forms.local_target(form.get("to")), status_code=303)
    guard_of(request).set_cookie(response, ZONE_COOKIE, zone, max_age=YEAR)
    return response
