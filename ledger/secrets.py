"""Variables and connections for DAGs, with their secrets encrypted at rest and masked in task logs.

* Stored with `ledger variables set` / `ledger connections add`; a variable's value, and a connection's
  password and extra, are encrypted with Fernet (the `cryptography` library) under LEDGER_FERNET_KEY (one
  key, or several separated by commas: the first encrypts, any decrypts, so keys can be rotated). Without
  a key nothing secret is stored: the command says how to make one.
* Read in tasks with `Variable.get("name")` / `get_connection("id")`, and in templates with
  `{{ var.value.name }}` / `{{ conn.id.host }}`: the environment first (`LEDGER_VAR_<NAME>`,
  `LEDGER_CONN_<ID>` as a URI), then the database.
* Every secret a try reads (a connection's password; a variable whose name says it is one: password,
  secret, token, api_key, private_key, credential, access_key, auth) is masked: the try's log and its
  rendered templates are rewritten with `***` in its place when the try ends.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, unquote, urlsplit, urlunsplit

from ledger.errors import ConfigError, InvalidInput

KEY_HINT = ("set LEDGER_FERNET_KEY to a Fernet key, e.g. the output of "
            "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`")
_seen: set[str] = set()  # secrets read in this process: masked in the try's log when it ends
MIN_MASKED = 3  # shorter values are not masked (masking "a" would garble every log)


def _fernet() -> Any:
    from cryptography.fernet import Fernet, MultiFernet

    raw = os.environ.get("LEDGER_FERNET_KEY", "").strip()
    if not raw:
        raise ConfigError(f"secrets are stored encrypted: {KEY_HINT}")
    try:
        return MultiFernet([Fernet(k.strip().encode()) for k in raw.split(",") if k.strip()])
    except (ValueError, TypeError):
        raise ConfigError(f"LEDGER_FERNET_KEY is not a valid Fernet key; {KEY_HINT}") from None


def encrypt(text: str) -> str:
    return str(_fernet().encrypt(text.encode()).decode())


def decrypt(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return str(_fernet().decrypt(token.encode()).decode())
    except InvalidToken:
        raise ConfigError("a stored secret cannot be decrypted with LEDGER_FERNET_KEY (was the key "
                          "changed? keep the old key after the new one, separated by a comma)") from None


SENSITIVE = ("password", "passwd", "secret", "token", "api_key", "apikey", "private_key", "credential",
             "access_key", "auth")


def sensitive(name: str) -> bool:
    """A variable whose name says it holds a secret (as Airflow decides which variables to mask)."""
    lowered = name.lower()
    return any(word in lowered for word in SENSITIVE)


def seen(secret: str | None) -> None:
    if secret and len(secret) >= MIN_MASKED:
        _seen.add(secret)


def seen_settings() -> None:
    """The secrets of ledger's own settings (LEDGER_FERNET_KEY, LEDGER_SMTP_PASSWORD) are in every try's
    environment: they are masked like the secrets a try read."""
    for key in os.environ.get("LEDGER_FERNET_KEY", "").split(","):
        seen(key.strip())
    seen(os.environ.get("LEDGER_SMTP_PASSWORD"))


def mask(text: str) -> str:
    for secret in sorted(_seen, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def secrets_seen() -> bool:
    return bool(_seen)


def mask_file(path: str) -> None:
    """Rewrite a file (a try's or a callback's log) with the secrets read in this process as ***."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        masked = mask(text)
        if masked != text:
            Path(path).write_text(masked, encoding="utf-8")
    except OSError:
        pass


def _stored(read: Any) -> Any:
    """read(session) on the ledger database of this process's environment; None when there is no database."""
    from ledger.config import load_settings
    from ledger.db import make_read_engine, make_sessions, sqlite_file_missing

    url = load_settings().database_url
    if sqlite_file_missing(url):
        return None
    engine = make_read_engine(url)
    try:
        session = make_sessions(engine)()
        try:
            return read(session)
        finally:
            session.close()
    finally:
        engine.dispose()


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
        try:
            value = json.loads(self.extra or "{}")
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


def get_connection(conn_id: str) -> ConnectionInfo:
    """A connection: LEDGER_CONN_<ID> (a URI) first, then the database. LookupError when neither has it."""
    raw = os.environ.get(f"LEDGER_CONN_{conn_id.upper()}")
    if raw is not None:
        info = ConnectionInfo.from_uri(conn_id, raw)
    else:
        from ledger.store import secrets as store

        row = _stored(lambda session: store.connection(session, conn_id))
        if row is None:
            raise LookupError(f"connection {conn_id!r} is not defined (LEDGER_CONN_{conn_id.upper()}, or "
                              "ledger connections add)")
        info = ConnectionInfo(row.conn_id, row.conn_type, row.host, row.port, row.login,
                              decrypt(row.password_encrypted) if row.password_encrypted else None, row.schema,
                              decrypt(row.extra_encrypted) if row.extra_encrypted else None)
    seen(info.password)
    return info


class Variable:
    """`Variable.get("name")`, as in Airflow: LEDGER_VAR_<NAME> first, then the database."""

    _MISSING: Any = object()

    @staticmethod
    def get(key: str, default_var: Any = _MISSING, deserialize_json: bool = False) -> Any:
        raw = os.environ.get(f"LEDGER_VAR_{key.upper()}")
        if raw is None:
            from ledger.store import secrets as store

            row = _stored(lambda session: store.variable(session, key))
            raw = decrypt(row.value_encrypted) if row is not None else None
        if raw is None:
            if default_var is not Variable._MISSING:
                return default_var
            raise LookupError(f"variable {key!r} is not set (LEDGER_VAR_{key.upper()}, or ledger variables set)")
        if sensitive(key):
            seen(raw)
        return json.loads(raw) if deserialize_json else raw
