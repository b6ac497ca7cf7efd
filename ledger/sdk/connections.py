"""A connection as task code reads it (`get_connection`, ledger/sdk/secrets.py) and `ledger connections add`
parses it: its fields, from a URI and back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit, urlunsplit

from ledger.core.errors import InvalidInput


@dataclass
class ConnectionInfo:
    conn_id: str
    conn_type: str
    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: str | None = None
    schema: str | None = None
    extra: str | None = None

    @property
    def extra_dejson(self) -> dict[str, Any]:
        """The extra as a dict: JSON, or a URI's query string (`?region_name=x&endpoint_url=...`), whose
        `__extra__` holds JSON, as Airflow reads a connection URI."""
        text = (self.extra or "").strip()
        if text and not text.startswith("{"):
            pairs = dict(parse_qsl(text, keep_blank_values=True))
            if "__extra__" not in pairs:
                return pairs
            text = pairs["__extra__"]
        try:
            value = json.loads(text or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def get_uri(self) -> str:
        auth = ""
        if self.login:
            auth = quote(self.login, safe="") + (f":{quote(self.password, safe='')}" if self.password else "") + "@"
        where = (self.host or "") + (f":{self.port}" if self.port else "")
        return f"{self.conn_type}://{auth}{where}" + (f"/{self.schema}" if self.schema else "") \
            + (f"?{self.extra}" if self.extra and not self.extra.startswith("{") else "")

    @staticmethod
    def from_uri(conn_id: str, uri: str) -> ConnectionInfo:
        parts = urlsplit(uri)
        if not parts.scheme:  # not parsed: the text is not echoed, it may hold a password
            raise InvalidInput(f"connection {conn_id!r}: its URI is not a URI like postgresql://user:pw@host:5432/db")
        try:
            port = parts.port
        except ValueError:
            raise InvalidInput(f"connection {conn_id!r}: the port of {_redacted(parts)!r} is not a number") from None
        return ConnectionInfo(conn_id, parts.scheme, parts.hostname, port,
                              unquote(parts.username) if parts.username else None,
                              unquote(parts.password) if parts.password else None,
                              parts.path.lstrip("/") or None, parts.query or None)


def _redacted(parts: SplitResult) -> str:
    """A URI with its password as *** (for messages)."""
    if parts.password is None:
        return urlunsplit(parts)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
