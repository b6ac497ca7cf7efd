"""Jinja2 templates with autoescaping on: everything a user controls is shown as text, never as markup."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from ledger.core.dates import local_text
from ledger.web.logview import ansi_html
from ledger.web.views import seconds_text

TEMPLATES = Path(__file__).resolve().parent / "templates"


def short(value: str | None, n: int = 8) -> str:
    return (value or "")[:n]


def when(value: str | datetime | None, timezone: str | None = None) -> str:
    """An ISO timestamp as `2024-03-01 06:00:00Z`-style text (UTC), '' for none. With the `timezone` of a DAG other
    than UTC: the time there as the CLI prints it (`2024-03-01 07:00:00+01:00`) and the UTC text beside it, each
    in its span; the page shows one of them (local by default, UTC after the toggle of static/live.js)."""
    if not value:
        return ""
    if isinstance(value, datetime):
        value = value.isoformat()
    utc = value.replace("T", " ").replace("+00:00", "Z")
    if not timezone or timezone == "UTC":
        return utc
    return Markup('<span class="tz-local" title="{u}">{loc}</span><span class="tz-utc">{u}</span>').format(
        u=utc, loc=local_text(value, timezone))


def clock(value: datetime, timezone: str) -> str:
    """The time of day of `value` in `timezone` (`07:05:09`): plain text, for SVG labels."""
    return local_text(value, timezone)[11:19]


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
ENV.filters.update(short=short, when=when, as_json=as_json, readable=readable, ansi=ansi_html, clock=clock)
ENV.globals.update(duration=duration, seconds=seconds_text)


def render(name: str, **context: Any) -> str:
    return ENV.get_template(name).render(**context)


def compile_templates() -> None:
    """Compile every template once (a server calls it at start: its first requests do not pay for it)."""
    for name in ENV.list_templates(extensions=["html"]):
        ENV.get_template(name)
