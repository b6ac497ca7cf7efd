"""Jinja2 templates with autoescaping on: everything a user controls is shown as text, never as markup."""

from __future__ import annotations

import json
from contextvars import ContextVar
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from ledger.core.dates import local_text
from ledger.web.logview import ansi_html
from ledger.web.views import seconds_text

TEMPLATES = Path(__file__).resolve().parent / "templates"


def short(value: str | None, n: int = 8) -> str:
    return (value or "")[:n]


# the zone the viewer chose for the times of the pages (the `ledger_tz` cookie, read by ledger/web/guard.py for each
# request): DAG (each DAG's own time zone; UTC where no DAG is concerned), UTC, or a zone name (the viewer's own)
DAG_ZONE, UTC_ZONE = "dag", "utc"
ZONE_COOKIE = "ledger_tz"
chosen_zone: ContextVar[str] = ContextVar("chosen_zone", default=DAG_ZONE)
here: ContextVar[str] = ContextVar("here", default="/")  # the page's path and query: where the zone form goes back


@cache
def known_zones() -> frozenset[str]:
    """The IANA time zone names a viewer may choose (read once: the tz database's index)."""
    return frozenset(available_timezones())


def zone_choice(raw: str | None) -> str:
    """A `ledger_tz` cookie's value as a choice: `dag`, `utc` or a known zone name; anything else: `dag`."""
    if raw in (DAG_ZONE, UTC_ZONE) or (raw and raw in known_zones()):
        return str(raw)
    return DAG_ZONE


def shown_zone(timezone: str | None = None) -> str:
    """The zone a page shows the times of a DAG in `timezone` in (None: times of no one DAG), as the viewer
    chose: the DAG's, UTC, or the viewer's own."""
    chosen = chosen_zone.get()
    if chosen == DAG_ZONE:
        return timezone or "UTC"
    return "UTC" if chosen == UTC_ZONE else chosen


def when(value: str | datetime | None, timezone: str | None = None) -> str:
    """An ISO timestamp as text in one format per page: in the zone the viewer chose (shown_zone), with its UTC
    offset as the CLI prints it (`2024-03-01 07:00:00+01:00`), a time in UTC as `2024-03-01 06:00:00Z`; '' for
    none. `timezone`: the DAG's, when the time is one of a DAG's."""
    if not value:
        return ""
    if isinstance(value, datetime):
        value = value.isoformat()
    zone = shown_zone(timezone)
    if zone != "UTC":
        return local_text(value, zone)
    if value.endswith("+00:00"):  # as stored: its fraction of a second kept
        return value.replace("T", " ").replace("+00:00", "Z")
    return local_text(value, "UTC").replace("+00:00", "Z")


def until(value: str | datetime | None, timezone: str | None = None) -> str:
    """The end of a range: a day's last instant in the zone shown (how an end typed as a bare date is kept: that
    whole day) as that day's date, as it was typed (`2024-03-05`); any other end as `when` prints it."""
    if not value:
        return ""
    moment = (datetime.fromisoformat(value) if isinstance(value, str) else value).astimezone(
        ZoneInfo(shown_zone(timezone)))
    if (moment + timedelta(microseconds=1)).date() != moment.date():
        return moment.date().isoformat()
    return when(value, timezone)


def clock(value: datetime, timezone: str) -> str:
    """The time of day of `value` in the zone the page shows (`07:05:09`): plain text, for SVG labels."""
    return local_text(value, shown_zone(timezone))[11:19]


def duration(start: str | None, end: str | None) -> str:
    """How long between two ISO timestamps, as `1m 05s`; '' when either is missing."""
    if not start or not end:
        return ""
    return seconds_text(max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()))


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _readable(value: Any) -> str:
    """One value of an event's details as a person reads it: a list as `a, b`, a version hash by its first 12
    characters, nothing as `none`, a mapping as `key value` pairs, other values as text."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value
    if isinstance(value, list | tuple):
        return ", ".join(_readable(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return "; ".join(f"{k} {_readable(v)}" for k, v in sorted(value.items())) if value else "none"
    return str(value)


def readable(details: dict[str, Any] | None) -> Markup:
    """An event's (or a signal's) details as `key: value` lines, keys in words, not raw JSON; the JSON stays in
    the API and `--json`."""
    if not details:
        return Markup("")
    return Markup("").join(Markup('<span class="detail"><b>{k}</b> {v}</span>').format(
        k=str(key).replace("_", " "), v=_readable(value)) for key, value in sorted(details.items()))


ENV = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)
ENV.filters.update(short=short, when=when, until=until, as_json=as_json, readable=readable, ansi=ansi_html, clock=clock)
ENV.globals.update(duration=duration, seconds=seconds_text, chosen_zone=chosen_zone.get, here=here.get)


def render(name: str, **context: Any) -> str:
    return ENV.get_template(name).render(**context)


def compile_templates() -> None:
    """Compile every template once (a server calls it at start: its first requests do not pay for it)."""
    for name in ENV.list_templates(extensions=["html"]):
        ENV.get_template(name)
