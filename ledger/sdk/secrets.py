"""Variables and connections as task code reads them, and the masking of the secrets a try read.

* Stored with `ledger variables set` / `ledger connections add`; a variable's value, and a connection's
  password and extra, are encrypted with Fernet (the `cryptography` library; the keys and their rotation:
  ledger/infra/fernet.py).
* Read in tasks with `Variable.get("name")` / `get_connection("id")`, and in templates with
  `{{ var.value.name }}` / `{{ conn.id.host }}`: the environment first (`LEDGER_VAR_<NAME>`, then Airflow's
  `AIRFLOW_VAR_<NAME>`; `LEDGER_CONN_<ID>` as a URI), then the ledger through the client of task code
  (ledger/sdk/ledger_client.py): the database where the try has it, ledger's webserver on a Celery worker, which
  has none.
* Every secret a try reads (a connection's password; a variable whose name says it is one, see
  ledger/core/secret_names.py) is masked: the try's log and its rendered templates are rewritten with `***` in
  its place when the try ends. Commands that show values a try passed on (`ledger tasks xcom`) mask every secret
  ledger knows of (mask_value with ledger/services/secrets.py's known_secrets).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ledger.core.errors import InvalidInput, LedgerError
from ledger.core.secret_names import sensitive
from ledger.infra.config import load_settings
from ledger.infra.fernet import key_file, parse_keys
from ledger.infra.worker_client import NoLedger
from ledger.infra.workers import TOKEN_VARIABLE
from ledger.sdk.connections import ConnectionInfo
from ledger.sdk.ledger_client import LedgerClient, client

_seen: set[str] = set()  # secrets read in this process: masked in the try's log when it ends
MIN_MASKED = 3  # shorter values are not masked (masking "a" would garble every log)

T = TypeVar("T")


def seen(secret: str | None) -> None:
    if secret and len(secret) >= MIN_MASKED:
        _seen.add(secret)


# What the settings' secrets were last worked out from, and what they were: see settings_secrets.
_settings_found: tuple[tuple[Any, ...], list[str]] | None = None
_SETTINGS_INPUTS = ("LEDGER_FERNET_KEY", "LEDGER_SMTP_PASSWORD", TOKEN_VARIABLE, "LEDGER_HOME", "LEDGER_DATABASE_URL",
                    "LEDGER_DAGS_FOLDER", "HOME")
_key_file_found: tuple[tuple[Any, ...], Path | None] | None = None


def settings_secrets(*, same_inputs: bool = False) -> list[str]:
    """The secrets of ledger's own settings: the Fernet keys (LEDGER_FERNET_KEY and the key file),
    LEDGER_SMTP_PASSWORD and a worker's LEDGER_WORKER_TOKEN.

    Worked out once per process and again only when what they come from changes (those variables, the
    folder the settings' home resolves from, the key file's identity and size and time): a worker calls this
    before it forks a try, so the try's process inherits the answer instead of resolving the settings again.
    `same_inputs`: the caller knows the variables and the current folder are as they were at this process's last
    call (a LocalExecutor worker in which only its own loop ran since its last fork: decision 0324), so only the key
    file is looked at again."""
    global _settings_found
    if same_inputs and _settings_found is not None:
        _inputs, known, identity = _settings_found[0]
        if known is None or (identity is None and not os.access(known, os.F_OK)) or _identity(known) == identity:
            return list(_settings_found[1])  # (still no key file: found without the exception a stat would make)
    env = os.environ
    inputs = tuple(env.get(name) for name in _SETTINGS_INPUTS)  # (read once: a worker does this before each fork)
    path = _key_file(inputs[3:])
    key = (inputs, path, _identity(path) if path else None)
    if _settings_found is None or _settings_found[0] != key:
        found = parse_keys(env.get("LEDGER_FERNET_KEY", ""))
        with contextlib.suppress(OSError, ValueError, LedgerError):  # no key file (yet), or an unreadable one
            if path is not None:
                found += parse_keys(path.read_text(encoding="ascii"))
        found += [env[name] for name in ("LEDGER_SMTP_PASSWORD", TOKEN_VARIABLE) if env.get(name)]
        _settings_found = (key, found)
    return list(_settings_found[1])


def _identity(path: Path) -> tuple[int, ...] | None:
    """A file's device, inode, size and modification time (None: there is none): when they are the same, so is
    what it holds."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _key_file(inputs: tuple[str | None, ...]) -> Path | None:
    """The key file of the settings' home (load_settings), resolved again only when the variables it comes
    from (`inputs`: the values of _SETTINGS_INPUTS[3:]) or the current folder change; None when the settings are
    bad."""
    global _key_file_found
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    key = (inputs, cwd)
    if _key_file_found is None or _key_file_found[0] != key:
        try:
            path: Path | None = key_file(load_settings().home)
        except (OSError, ValueError, LedgerError):
            path = None
        _key_file_found = (key, path)
    return _key_file_found[1]


def seen_settings(*, as_worked_out: bool = False) -> None:
    """The secrets of ledger's own settings are in every try's environment or readable by it: they are
    masked like the secrets a try read. `as_worked_out`: those settings_secrets() last worked out in this process,
    not checked again (a forked try's process: its worker worked them out just before forking it)."""
    found = _settings_found[1] if as_worked_out and _settings_found is not None else settings_secrets()
    for secret in found:
        seen(secret)


_PLAIN = frozenset({str, bytes, int, float, bool})  # values that hold no others


def seen_arguments(task: Any) -> None:
    """The values of a task's secret-looking arguments (`env={"DB_PASSWORD": ...}`, `op_kwargs={"api_key": ...}`)
    are masked in its try's log and rendered templates, like the secrets it read."""
    def secret(value: Any) -> None:
        if isinstance(value, str):
            seen(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seen(str(value))
        elif isinstance(value, (list, tuple)):
            for v in value:
                secret(v)
        elif isinstance(value, (dict, Mapping)):
            for v in value.values():
                secret(v)

    def walk(value: Any) -> None:
        if value is None or type(value) in _PLAIN:  # most arguments; and a dict, list or tuple before the ABC
            return
        if isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, (dict, Mapping)):
            for k, v in value.items():
                (secret if isinstance(k, str) and sensitive(k) else walk)(v)

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


def secrets_seen() -> bool:
    return bool(_seen)


def mask_file(path: str) -> None:
    """Rewrite a file (a try's or a callback's log) with the secrets read in this process as ***, its line ends
    read as universal newlines (a CRLF or CR log is rewritten with LF ends, as a text read sees it). A file that
    holds none of them, byte for byte (most logs: a worker's settings' secrets are seen by every try, and seldom
    printed), is read as bytes and left alone, without a text decoded or a second copy made (decision 0334); a
    secret with a line end or a replacement character in it is always looked for in the decoded text, where the
    file's line ends and undecodable bytes read as they do in its masked form."""
    try:
        data = Path(path).read_bytes()
        if not any(_only_in_text(secret) or secret.encode("utf-8", "surrogatepass") in data for secret in _seen):
            return
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        masked = mask(text)
        if masked != text:
            Path(path).write_text(masked, encoding="utf-8")
    except OSError:
        pass


def _only_in_text(secret: str) -> bool:
    """A secret the bytes of a file may hold in another form than its own UTF-8: a line end (CRLF or CR in the
    file) or a replacement character (an undecodable byte in the file)."""
    return "\n" in secret or "\r" in secret or "\ufffd" in secret


def _stored(read: Callable[[LedgerClient], T]) -> T | None:
    """What the ledger holds, as `read` finds it; None (nothing stored) for a try that reaches no ledger at all
    (no database, no webserver: `ledger dags test` on a fresh folder), so that the environment's values and a
    default still serve it. A ledger that is there but fails still raises."""
    try:
        ledger = client()
    except NoLedger:
        return None
    return read(ledger)


def get_connection(conn_id: str) -> ConnectionInfo:
    """A connection: LEDGER_CONN_<ID> (a URI) first, then the ledger. LookupError when neither has it."""
    raw = os.environ.get(f"LEDGER_CONN_{conn_id.upper()}")
    if raw is not None:
        info = ConnectionInfo.from_uri(conn_id, raw)
    else:
        found = _stored(lambda ledger: ledger.connection(conn_id))
        if found is None:
            raise LookupError(f"connection {conn_id!r} is not defined (LEDGER_CONN_{conn_id.upper()}, or "
                              "ledger connections add)")
        info = ConnectionInfo(found["conn_id"], found["conn_type"], found.get("host"), found.get("port"),
                              found.get("login"), found.get("password"), found.get("schema"), found.get("extra"))
    seen(info.password)
    return info


def find_connection(conn_id: str) -> ConnectionInfo:
    """A connection as Airflow's providers and templates (`{{ conn.ID }}`) read it: ledger's (get_connection), then
    an AIRFLOW_CONN_<ID> variable (airflow_connection). LookupError naming all three when none has it."""
    try:
        return get_connection(conn_id)
    except LookupError:
        raw = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
        if raw is None:
            raise LookupError(f"connection {conn_id!r} is not defined (LEDGER_CONN_{conn_id.upper()}, ledger "
                              f"connections add, or AIRFLOW_CONN_{conn_id.upper()})") from None
        info = airflow_connection(conn_id, raw)
        seen(info.password)
        return info


AIRFLOW_JSON_FIELDS = ("conn_type", "host", "port", "login", "password", "schema", "extra", "description")


def airflow_connection(conn_id: str, raw: str) -> ConnectionInfo:
    """An AIRFLOW_CONN_<ID> value as Airflow reads it: a URI, or (Airflow 2.3+) a JSON object of the connection's
    fields (`conn_type`, `host`, `port`, `login`, `password`, `schema`, `description`, and `extra` as an object or
    a string; Airflow's Connection.from_json).
    InvalidInput in one line that does not echo the value (it may hold a password) when it is neither."""
    if not raw.lstrip().startswith("{"):
        return ConnectionInfo.from_uri(conn_id, raw)
    where = f"connection {conn_id!r} (AIRFLOW_CONN_{conn_id.upper()})"
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{where}: its JSON does not parse ({exc.msg}, at character {exc.pos})") from None
    unknown = sorted(set(fields) - set(AIRFLOW_JSON_FIELDS)) if isinstance(fields, dict) else []
    if not isinstance(fields, dict) or unknown:
        raise InvalidInput(f"{where}: its JSON must be an object of the fields {', '.join(AIRFLOW_JSON_FIELDS)}"
                           + (f", not {', '.join(unknown)}" if unknown else ""))
    port, extra = fields.get("port"), fields.get("extra")
    try:
        port = int(port) if port not in (None, "") else None
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: its port is not a number") from None

    def text(name: str) -> str | None:
        value = fields.get(name)
        return None if value is None else str(value)

    return ConnectionInfo(conn_id, text("conn_type") or "", text("host"), port, text("login"), text("password"),
                          text("schema"), json.dumps(extra) if isinstance(extra, dict) else text("extra"))


VARIABLE_PREFIXES = ("LEDGER_VAR_", "AIRFLOW_VAR_")  # the environment's variables, read in this order


def variable_names(key: str) -> list[str]:
    """The environment variables that hold the variable `key`, in the order they are read: ledger's, then
    Airflow's (Airflow's environment secrets backend, which it reads before its metastore), each with the key
    upper-cased."""
    return [prefix + key.upper() for prefix in VARIABLE_PREFIXES]


def variable_from_environment(key: str) -> str | None:
    """The variable `key` as this process's environment holds it (variable_names); None: it does not."""
    return next((os.environ[name] for name in variable_names(key) if name in os.environ), None)


class VariableNotSet(KeyError):
    """A variable neither the environment nor the ledger has, asked for without a default. A KeyError, as
    Airflow's Variable.get raises, so that a DAG file's `except KeyError:` catches it (and so a LookupError)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"variable {key!r} is not set ({', '.join(variable_names(key))}, or ledger variables "
                         "set)")
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])  # the message itself, not KeyError's repr of it


class Variable:
    """`Variable.get("name")`, as in Airflow: the environment first (LEDGER_VAR_<NAME>, then AIRFLOW_VAR_<NAME>),
    then the ledger; VariableNotSet (a KeyError) when none has it and no default is given."""

    _MISSING: Any = object()

    @staticmethod
    def get(key: str, default_var: Any = _MISSING, deserialize_json: bool = False) -> Any:
        raw = variable_from_environment(key)
        if raw is None:
            raw = _stored(lambda ledger: ledger.variable(key))
        if raw is None:
            if default_var is not Variable._MISSING:
                return default_var
            raise VariableNotSet(key)
        if sensitive(key):
            seen(raw)
        return json.loads(raw) if deserialize_json else raw
