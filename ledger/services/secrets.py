"""Variables and connections for DAGs, with their secrets encrypted at rest and masked where they are shown.

* Stored with `ledger variables set` / `ledger connections add`; a variable's value, and a connection's
  password and extra, are encrypted with Fernet (the `cryptography` library; the keys and their rotation:
  ledger/services/fernet.py).
* Read in tasks with `Variable.get("name")` / `get_connection("id")`, and in templates with
  `{{ var.value.name }}` / `{{ conn.id.host }}`: the environment first (`LEDGER_VAR_<NAME>`,
  `LEDGER_CONN_<ID>` as a URI), then the ledger through the client of task code (ledger/sdk/ledger_client.py):
  the database where the try has it, ledger's webserver on a Celery worker, which has none.
* Every secret a try reads (a connection's password; a variable whose name says it is one, see
  ledger/core/secret_names.py) is masked: the try's log and its rendered templates are rewritten with `***` in
  its place when the try ends. Commands that show values a try passed on (`ledger tasks xcom`) mask every secret
  ledger knows of (known_secrets, mask_value).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.errors import LedgerError
from ledger.core.secret_names import sensitive
from ledger.infra.config import load_settings
from ledger.infra.workers import TOKEN_VARIABLE
from ledger.sdk.connections import ConnectionInfo as ConnectionInfo
from ledger.sdk.ledger_client import client
from ledger.services.fernet import decrypt, key_file, parse_keys

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

_seen: set[str] = set()  # secrets read in this process: masked in the try's log when it ends
MIN_MASKED = 3  # shorter values are not masked (masking "a" would garble every log)


def seen(secret: str | None) -> None:
    if secret and len(secret) >= MIN_MASKED:
        _seen.add(secret)


def settings_secrets() -> list[str]:
    """The secrets of ledger's own settings: the Fernet keys (LEDGER_FERNET_KEY and the key file),
    LEDGER_SMTP_PASSWORD and a worker's LEDGER_WORKER_TOKEN."""
    found = parse_keys(os.environ.get("LEDGER_FERNET_KEY", ""))
    with contextlib.suppress(OSError, ValueError, LedgerError):  # no key file (yet), or an unreadable one
        found += parse_keys(key_file(load_settings().home).read_text(encoding="ascii"))
    found += [os.environ[name] for name in ("LEDGER_SMTP_PASSWORD", TOKEN_VARIABLE) if os.environ.get(name)]
    return found


def seen_settings() -> None:
    """The secrets of ledger's own settings are in every try's environment or readable by it: they are
    masked like the secrets a try read."""
    for secret in settings_secrets():
        seen(secret)


def seen_arguments(task: Any) -> None:
    """The values of a task's secret-looking arguments (`env={"DB_PASSWORD": ...}`, `op_kwargs={"api_key": ...}`)
    are masked in its try's log and rendered templates, like the secrets it read."""
    def secret(value: Any) -> None:
        if isinstance(value, str):
            seen(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seen(str(value))
        elif isinstance(value, Mapping):
            for v in value.values():
                secret(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                secret(v)

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                (secret if isinstance(k, str) and sensitive(k) else walk)(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    names = {*getattr(task, "template_fields", ()), *getattr(task, "mappable_fields", ()), "op_kwargs", "spark_conf"}
    for name in sorted(names):
        walk(getattr(task, name, None))


def mask(text: str) -> str:
    for secret in sorted(_seen, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def mask_value(value: Any, secrets: Collection[str]) -> Any:
    """A JSON value with every secret in it as *** (in strings, dict keys included, and a number whose text is
    a secret)."""
    if not secrets:
        return value
    ordered = sorted(secrets, key=len, reverse=True)

    def text(t: str) -> str:
        for secret in ordered:
            t = t.replace(secret, "***")
        return t

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {text(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and str(v) in secrets:
            return "***"
        return v

    return walk(value)


def known_secrets(session: Session) -> frozenset[str]:
    """Every secret ledger knows of, for masking what it shows: the values of variables whose names say they are
    secret and connections' passwords (and their extras' secret-named fields), stored or in this process's
    environment (LEDGER_VAR_*, LEDGER_CONN_*), and ledger's own (settings_secrets). ConfigError when a stored
    secret cannot be decrypted: what is shown could then not be checked."""
    from ledger.store import secrets as store

    found: list[str | None] = list(settings_secrets())
    for row in store.variables(session):
        if sensitive(row.key):
            found.append(decrypt(row.value_encrypted))
    for conn in store.connections(session):
        found.append(decrypt(conn.password_encrypted) if conn.password_encrypted else None)
        found += _extra_secrets(decrypt(conn.extra_encrypted) if conn.extra_encrypted else None)
    for name, raw in os.environ.items():
        if name.startswith("LEDGER_VAR_") and sensitive(name[len("LEDGER_VAR_"):]):
            found.append(raw)
        elif name.startswith("LEDGER_CONN_"):
            try:
                info = ConnectionInfo.from_uri(name[len("LEDGER_CONN_"):].lower(), raw)
            except LedgerError:
                continue
            found += [info.password, *_extra_secrets(info.extra)]
    return frozenset(s for s in found if s and len(s) >= MIN_MASKED)


def _extra_secrets(extra: str | None) -> list[str]:
    """The values of a connection extra's secret-named fields (a JSON object; anything else: none)."""
    try:
        value = json.loads(extra or "{}")
    except json.JSONDecodeError:
        return []
    if not isinstance(value, dict):
        return []
    return [str(v) for k, v in value.items() if sensitive(str(k)) and isinstance(v, (str, int))]


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


def get_connection(conn_id: str) -> ConnectionInfo:
    """A connection: LEDGER_CONN_<ID> (a URI) first, then the ledger. LookupError when neither has it."""
    raw = os.environ.get(f"LEDGER_CONN_{conn_id.upper()}")
    if raw is not None:
        info = ConnectionInfo.from_uri(conn_id, raw)
    else:
        found = client().connection(conn_id)
        if found is None:
            raise LookupError(f"connection {conn_id!r} is not defined (LEDGER_CONN_{conn_id.upper()}, or "
                              "ledger connections add)")
        info = ConnectionInfo(found["conn_id"], found["conn_type"], found.get("host"), found.get("port"),
                              found.get("login"), found.get("password"), found.get("schema"), found.get("extra"))
    seen(info.password)
    return info


class Variable:
    """`Variable.get("name")`, as in Airflow: LEDGER_VAR_<NAME> first, then the ledger."""

    _MISSING: Any = object()

    @staticmethod
    def get(key: str, default_var: Any = _MISSING, deserialize_json: bool = False) -> Any:
        raw = os.environ.get(f"LEDGER_VAR_{key.upper()}")
        if raw is None:
            raw = client().variable(key)
        if raw is None:
            if default_var is not Variable._MISSING:
                return default_var
            raise LookupError(f"variable {key!r} is not set (LEDGER_VAR_{key.upper()}, or ledger variables set)")
        if sensitive(key):
            seen(raw)
        return json.loads(raw) if deserialize_json else raw
