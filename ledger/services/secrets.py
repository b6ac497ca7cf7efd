"""Variables and connections for DAGs, with their secrets encrypted at rest and masked where they are shown.

* Stored with `ledger variables set` / `ledger connections add`; a variable's value, and a connection's
  password and extra, are encrypted with Fernet (the `cryptography` library). The keys: LEDGER_FERNET_KEY
  when set, else the file `fernet.key` in LEDGER_HOME, made (mode 0600) the first time a secret is stored.
  Either holds one key or several (separated by commas or lines): the first encrypts, any decrypts, and
  `ledger db rotate-fernet-key` re-encrypts every stored secret with the first, so keys can be rotated.
* Read in tasks with `Variable.get("name")` / `get_connection("id")`, and in templates with
  `{{ var.value.name }}` / `{{ conn.id.host }}`: the environment first (`LEDGER_VAR_<NAME>`,
  `LEDGER_CONN_<ID>` as a URI), then the database; on a Celery worker, which has no database, ledger's
  webserver (ledger/infra/worker_client.py).
* Every secret a try reads (a connection's password; a variable whose name says it is one, see SENSITIVE)
  is masked: the try's log and its rendered templates are rewritten with `***` in its place when the try
  ends. Commands that show values a try passed on (`ledger tasks xcom`) mask every secret ledger knows of
  (known_secrets, mask_value).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, quote, unquote, urlsplit, urlunsplit

from ledger.core.errors import ConfigError, InvalidInput, LedgerError
from ledger.infra import worker_client
from ledger.infra.workers import TOKEN_VARIABLE

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

KEY_HINT = ("copy the key file from the host that stored the secrets, or set LEDGER_FERNET_KEY to the key "
            "(docs/operations.md: Secrets and the Fernet key)")
_seen: set[str] = set()  # secrets read in this process: masked in the try's log when it ends
MIN_MASKED = 3  # shorter values are not masked (masking "a" would garble every log)


KEY_FILE = "fernet.key"  # in LEDGER_HOME: the keys when LEDGER_FERNET_KEY is not set


def key_file(home: Path) -> Path:
    return home / KEY_FILE


def parse_keys(text: str) -> list[str]:
    """The keys of LEDGER_FERNET_KEY or of the key file: separated by commas or lines, blanks ignored."""
    return [k.strip() for k in text.replace("\n", ",").split(",") if k.strip()]


def create_key_file(path: Path) -> str:
    """The text of the key file at `path`, made with a new key (mode 0600) if there is none yet.

    The key is written to a private temporary file that is then hard-linked to `path`: the link fails when
    the file exists, so processes that race here all end up with the one key that won, and none ever
    reads a half-written file."""
    from cryptography.fernet import Fernet

    try:
        return path.read_text(encoding="ascii")
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(Fernet.generate_key().decode() + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use its key
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="ascii")


def _home() -> Path:
    from ledger.infra.config import load_settings

    return load_settings().home


def fernet_keys(*, create: bool = False) -> tuple[list[str], str]:
    """(keys, where they come from): LEDGER_FERNET_KEY when set, else LEDGER_HOME's key file (made with a new
    key when `create` and there is none). ConfigError when there is no key and `create` is false."""
    raw = os.environ.get("LEDGER_FERNET_KEY", "").strip()
    if raw:
        return parse_keys(raw), "LEDGER_FERNET_KEY"
    path = key_file(_home())
    try:
        text = create_key_file(path) if create else path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigError(f"no Fernet key: LEDGER_FERNET_KEY is not set and {path} does not exist; {KEY_HINT}") \
            from None
    except OSError as exc:
        raise ConfigError(f"cannot read the Fernet key file {path}: {exc.strerror}; {KEY_HINT}") from None
    keys = parse_keys(text)
    if not keys:
        raise ConfigError(f"the Fernet key file {path} holds no key; {KEY_HINT}")
    return keys, str(path)


def _fernet(*, create: bool = False) -> Any:
    from cryptography.fernet import Fernet, MultiFernet

    keys, where = fernet_keys(create=create)
    try:
        return MultiFernet([Fernet(k.encode()) for k in keys])
    except (ValueError, TypeError):
        raise ConfigError(f"{where} is not a valid Fernet key; {KEY_HINT}") from None


def encrypt(text: str) -> str:
    """`text` encrypted with the first key (the key file is made on first need)."""
    return str(_fernet(create=True).encrypt(text.encode()).decode())


def decrypt(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return str(_fernet().decrypt(token.encode()).decode())
    except InvalidToken:
        raise ConfigError(f"a stored secret cannot be decrypted with the Fernet key in {fernet_keys()[1]} (was "
                          "the key changed? keep the old key after the new one, separated by a comma)") from None


def rotate(token: str) -> str:
    """A stored secret encrypted again with the first key (any key may decrypt it); ConfigError when none can."""
    from cryptography.fernet import InvalidToken

    try:
        return str(_fernet().rotate(token.encode()).decode())
    except InvalidToken:
        raise ConfigError(f"a stored secret cannot be decrypted with the Fernet keys in {fernet_keys()[1]}") \
            from None


# Airflow's DEFAULT_SENSITIVE_FIELDS (airflow/utils/log/secrets_masker.py), and credential, access_key and auth
SENSITIVE = ("access_token", "api_key", "apikey", "authorization", "passphrase", "passwd", "password",
             "private_key", "secret", "token", "keyfile_dict", "service_account", "credential", "access_key", "auth")


def sensitive(name: str) -> bool:
    """A name that says its value is a secret (as Airflow decides what to mask: any of SENSITIVE in it, in any
    case): a variable's name, a key of a task's arguments (`env={"DB_PASSWORD": ...}`), of a connection's extra."""
    lowered = name.lower()
    return any(word in lowered for word in SENSITIVE)


def seen(secret: str | None) -> None:
    if secret and len(secret) >= MIN_MASKED:
        _seen.add(secret)


def settings_secrets() -> list[str]:
    """The secrets of ledger's own settings: the Fernet keys (LEDGER_FERNET_KEY and the key file),
    LEDGER_SMTP_PASSWORD and a worker's LEDGER_WORKER_TOKEN."""
    found = parse_keys(os.environ.get("LEDGER_FERNET_KEY", ""))
    with contextlib.suppress(OSError, ValueError, LedgerError):  # no key file (yet), or an unreadable one
        found += parse_keys(key_file(_home()).read_text(encoding="ascii"))
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


def _stored(read: Any) -> Any:
    """read(session) on the ledger database of this process's environment; None when there is no database."""
    from ledger.infra.config import load_settings
    from ledger.store.db import make_read_engine, make_sessions, sqlite_file_missing

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
    elif worker_client.on_worker():  # no database here: ledger's webserver serves it
        served = worker_client.fetch("connections", conn_id)
        if served is None:
            raise LookupError(f"connection {conn_id!r} is not defined (LEDGER_CONN_{conn_id.upper()}, or "
                              "ledger connections add)")
        info = ConnectionInfo(served["conn_id"], served["conn_type"], served.get("host"), served.get("port"),
                              served.get("login"), served.get("password"), served.get("schema"), served.get("extra"))
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
        if raw is None and worker_client.on_worker():  # no database here: ledger's webserver serves it
            served = worker_client.fetch("variables", key)
            raw = served["value"] if served is not None else None
        elif raw is None:
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
