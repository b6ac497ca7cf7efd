"""Every `LEDGER_*` environment variable ledger reads, in one table: its name, its kind and default, who reads
it, and what it does. Values are read through `value()` (typed, validated, one line naming the variable when
bad); `bad_values()` and `unknown_names()` check a whole environment at once, which `ledger scheduler`,
`ledger webserver` and `ledger worker` do before they start; docs/settings.md is generated from this table
(docs/generate_settings_table.py), and a test keeps every `LEDGER_` name in the source listed here.

The scheduler's own settings (LEDGER_PARALLELISM, LEDGER_POLL_INTERVAL, ...) are the fields of
SchedulerSettings (ledger/infra/scheduler_settings.py), each described there in its field's metadata; they are
part of this table through `variables()`.

Besides the settings an operator sets, ledger sets variables for the tries it runs (TRY_ENVIRONMENT: the
run's facts a Bash command or a Python task reads) and for the processes it starts itself (INTERNAL).
"""

from __future__ import annotations

import difflib
import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.infra.values import parse_bool


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    kind: str  # text | path | url | int | float | bool | secret
    default: str  # as the docs show it ("" : unset)
    readers: str  # who reads it
    help: str
    minimum: float | None = None  # int and float: the least value accepted

    def parse(self, raw: str) -> Any:
        """The value of `raw` for this variable, or ConfigError naming it."""
        if self.kind == "bool":
            return parse_bool(self.name, raw)
        if self.kind in ("int", "float"):
            try:
                number: float = int(raw) if self.kind == "int" else float(raw)
            except ValueError:
                raise ConfigError(f"{self.name}={raw!r} is not a valid {self.kind}") from None
            if not math.isfinite(number):
                raise ConfigError(f"{self.name}={raw!r} is not a finite number")
            if self.minimum is not None and number < self.minimum:
                raise ConfigError(f"{self.name}={raw!r}: must be a number of at least {self.minimum:g}")
            return number
        if self.kind == "path":
            return Path(raw).expanduser()
        return raw


VARIABLES: tuple[Variable, ...] = (
    # where ledger keeps its things
    Variable("LEDGER_HOME", "path", "~/.ledger", "every command",
             "The folder of the SQLite database, the logs, the DAGs folder and the code snapshots."),
    Variable("LEDGER_DATABASE_URL", "url", "sqlite:///$LEDGER_HOME/ledger.db", "every command",
             "The database: sqlite:///PATH or postgresql://USER@HOST:PORT/DB (psycopg 3)."),
    Variable("LEDGER_DAGS_FOLDER", "path", "$LEDGER_HOME/dags", "every command that parses DAG files",
             "The DAGs folder (`--dags-folder` wins)."),
    # what tries may do
    Variable("LEDGER_XCOM_MAX_BYTES", "int", "65536", "tries",
             "The largest value (JSON, bytes) a task may pass on.", minimum=1),
    # secrets
    Variable("LEDGER_FERNET_KEY", "secret", "", "every command that reads or writes variables and connections",
             "Fernet key(s), comma-separated, newest first: encrypts stored variables and connection passwords."),
    Variable("LEDGER_AUDIT_KEY", "secret", "", "ledger audit export",
             "An Ed25519 private key (64 hex digits): signs the chain head of each audit export (decision 0262)."),
    # e-mail (EmailNotifier, on_failure e-mails)
    Variable("LEDGER_SMTP_HOST", "text", "localhost", "callbacks", "The SMTP server e-mail notifiers send through."),
    Variable("LEDGER_SMTP_PORT", "int", "25", "callbacks", "Its port.", minimum=1),
    Variable("LEDGER_SMTP_USER", "text", "", "callbacks", "The user to log in as (no login when unset)."),
    Variable("LEDGER_SMTP_PASSWORD", "secret", "", "callbacks", "Its password."),
    Variable("LEDGER_SMTP_FROM", "text", "ledger@HOSTNAME", "callbacks", "The sender address."),
    Variable("LEDGER_SMTP_SSL", "bool", "false", "callbacks", "Connect with TLS from the start (SMTPS)."),
    Variable("LEDGER_SMTP_STARTTLS", "bool", "false", "callbacks", "Upgrade the connection with STARTTLS."),
    Variable("LEDGER_SMTP_TIMEOUT", "float", "30", "callbacks", "Seconds an SMTP exchange may take.", minimum=0),
    # the web view
    Variable("LEDGER_WEB_TOKEN", "secret", "", "webserver",
             "A bearer token that may read (and, for its admin, act) without a user; required off loopback."),
    Variable("LEDGER_WEB_SECRET", "secret", "random per start", "webserver",
             "Signs the session cookies; set it so that sessions survive a restart and several servers agree."),
    Variable("LEDGER_WEB_ALLOWED_HOSTS", "text", "loopback names", "webserver",
             "Host names the server answers to, comma-separated (DNS rebinding guard)."),
    Variable("LEDGER_WEB_SECURE_COOKIES", "bool", "false (true with --tls-cert)", "webserver",
             "Mark session cookies Secure (behind a TLS proxy)."),
    Variable("LEDGER_WEB_BASE_URL", "url", "", "tries, callbacks",
             "The web view's address as people open it (Airflow's [webserver] base_url): an Airflow task "
             "instance's log_url links to its try's log page there; unset, log_url is None."),
    # Celery workers
    Variable("LEDGER_CELERY_BROKER_URL", "url", "", "scheduler (celery), worker",
             "The Celery broker (redis://HOST:PORT/DB or amqp://...)."),
    Variable("LEDGER_CELERY_RESULT_BACKEND", "url", "the broker's URL", "scheduler (celery), worker",
             "Where outcomes, heartbeats and logs of remote tries go (Redis)."),
    Variable("LEDGER_CELERY_QUEUED_TIMEOUT", "float", "600", "scheduler (celery)",
             "Seconds a sent try may wait unclaimed before its message is sent again.", minimum=0),
    Variable("LEDGER_WORKER_HEARTBEAT_TIMEOUT", "float", "30", "scheduler (celery), worker",
             "Seconds without a heartbeat after which a worker is gone and its tries lost.", minimum=0),
    Variable("LEDGER_WORKER_CODE_FETCH_PATIENCE", "float", "30", "worker",
             "Seconds a worker keeps asking the webserver for a version's code (back-off 0.5 s doubling to 8 s) "
             "before the try is lost.", minimum=0),
    Variable("LEDGER_API_URL", "url", "", "worker",
             "The webserver a worker fetches code, variables and connections from."),
    Variable("LEDGER_WORKER_TOKEN", "secret", "", "worker, webserver",
             "The workers' credential for /api/v1/worker/ (the webserver checks it)."),
    Variable("LEDGER_REMOTE_LOGS", "url", "", "scheduler, webserver, worker",
             "s3://BUCKET/PREFIX: remote tries' logs in an S3-compatible store instead of the database."),
    Variable("LEDGER_REMOTE_LOGS_ENDPOINT", "url", "AWS", "scheduler, webserver, worker",
             "The S3-compatible server's URL (MinIO, Ceph...)."),
    Variable("LEDGER_REMOTE_LOGS_REGION", "text", "", "scheduler, webserver, worker", "The store's region."),
    # Spark
    Variable("LEDGER_SPARK_MASTER", "text", "local[*]", "Spark tries", "The Spark master of Spark tasks."),
    Variable("LEDGER_SPARK_REMOTE", "url", "", "Spark tries", "sc://HOST:PORT: run Spark tasks over Spark Connect."),
    Variable("LEDGER_SPARK_CONF", "text", "", "Spark tries", "Spark settings, as JSON or KEY=VALUE,KEY=VALUE."),
    # OpenLineage (ledger[openlineage]; on when OPENLINEAGE_URL or the client's configuration is set)
    Variable("LEDGER_OPENLINEAGE_QUEUE_SIZE", "int", "10000", "scheduler",
             "OpenLineage events waiting to be sent at most; an event past it is dropped and counted.", minimum=1),
    Variable("LEDGER_OPENLINEAGE_POLL_INTERVAL", "float", "1", "scheduler",
             "Seconds between the OpenLineage relay's reads of the tries recorded.", minimum=0.01),
    Variable("LEDGER_OPENLINEAGE_DRAIN_TIMEOUT", "float", "5", "scheduler",
             "Seconds a stopping scheduler waits for queued OpenLineage events to be sent.", minimum=0),
    # the test suite's
    Variable("LEDGER_VERIFY_MEMORY", "bool", "false", "scheduler, webserver",
             "Compare what is kept for speed with the database: what a job remembers of its runs after every loop, "
             "the dataset tallies at each read of the dataset graph (the test suite's)."),
)

# name prefixes of families of variables, each with what one member holds
FAMILIES: dict[str, str] = {
    "LEDGER_VAR_": "LEDGER_VAR_<NAME>: the variable NAME, before the stored one (read by tries)",
    "LEDGER_CONN_": "LEDGER_CONN_<ID>: the connection ID as a URI, before the stored one (read by tries)",
}

# set by ledger for each try it runs (a Bash command's environment, os.environ of a Python try)
TRY_ENVIRONMENT: dict[str, str] = {
    "LEDGER_DAG_ID": "the DAG", "LEDGER_RUN_ID": "the run", "LEDGER_TASK_ID": "the task",
    "LEDGER_TRY_NUMBER": "the try's number", "LEDGER_MAP_INDEX": "the mapped instance's index (mapped tasks)",
    "LEDGER_LOGICAL_DATE": "the run's logical date", "LEDGER_DATA_INTERVAL_START": "its data interval's start",
    "LEDGER_DATA_INTERVAL_END": "its end", "LEDGER_RUN_TYPE": "scheduled, backfill or manual",
    "LEDGER_DAG_VERSION": "the version the try runs", "LEDGER_CODE_DIR": "the folder of the version's code",
    "LEDGER_WRITES_PATH": "where the processes a try starts record the partitions they wrote (taken into its report)",
    "LEDGER_SIGNAL_KEY": "the signal that started the try (signal-driven tasks)",
    "LEDGER_SIGNAL_VALUE": "its value", "LEDGER_SIGNAL_VERSION": "its version",
    "LEDGER_WORKER_NAME": "the Celery worker running the try (set by `ledger worker`)",
}

# set by ledger for processes it starts itself; not settings
INTERNAL: dict[str, str] = {
    "LEDGER_TASK_ARGS": "a try's arguments, handed to its process",
    "LEDGER_ONLY": "the task a `dags test` child runs",
    "LEDGER_WORKER_SYS_PATH": "the import path handed to the LocalExecutor's workers",
    "LEDGER_WORKER_INCARNATION": "a Celery worker's incarnation, handed to its pool processes",
    "LEDGER_WORKER_MAIN_PID": "a Celery worker's main process, which its pool processes' supervisors watch",
}


# scheduler settings that others read too
ALSO_READ_BY = {"lock_timeout": "scheduler, backfill, webserver (a lock shown stale)",
                "max_map_length": "scheduler, backfill, DAG files (literal lists)"}


def scheduler_variables() -> tuple[Variable, ...]:
    """The scheduler's settings (SchedulerSettings fields) as variables of the table."""
    found = []
    defaults = SchedulerSettings()
    for f in fields(SchedulerSettings):
        if f.name == "verify_memory":
            continue
        default = getattr(defaults, f.name)
        kind = {bool: "bool", int: "int", float: "float"}.get(type(default), "text")
        shown = str(default).lower() if kind == "bool" else str(default)
        found.append(Variable(f"LEDGER_{f.name.upper()}", kind, shown, ALSO_READ_BY.get(f.name, "scheduler, backfill"),
                              str(f.metadata.get("help", ""))))
    return tuple(found)


@functools.cache
def variables() -> dict[str, Variable]:
    """Every setting by name."""
    return {v.name: v for v in (*VARIABLES, *scheduler_variables())}


def known(name: str) -> bool:
    return (name in variables() or name in TRY_ENVIRONMENT or name in INTERNAL
            or any(name.startswith(prefix) for prefix in FAMILIES))


def value(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The typed value of the setting `name` in `env` (default: this process's environment), or None when it
    is unset (or empty) and has no default the code can use; ConfigError, naming it, when the value is bad."""
    variable = variables()[name]
    raw = (os.environ if env is None else env).get(name)
    if raw is None or raw.strip() == "":
        return None
    return variable.parse(raw)


def bad_values(env: Mapping[str, str] | None = None) -> list[str]:
    """One line per ledger setting of `env` whose value is bad."""
    env = os.environ if env is None else env
    table = variables()
    lines = []
    for name in sorted(n for n in env if n in table):
        variable, raw = table[name], env[name]
        if raw.strip() == "" and variable.kind != "bool":
            continue
        try:
            variable.parse(raw)
        except ConfigError as exc:
            lines.append(str(exc))
    return lines


def unknown_names(env: Mapping[str, str] | None = None) -> list[str]:
    """One line per `LEDGER_*` name of `env` that is not ledger's (a typo: the nearest setting is suggested)."""
    env = os.environ if env is None else env
    table = variables()
    lines = []
    for name in sorted(n for n in env if n.startswith("LEDGER_") and not known(n)):
        near = difflib.get_close_matches(name.removeprefix("LEDGER_"), [n.removeprefix("LEDGER_") for n in table], n=1)
        lines.append(f"{name} is not a ledger setting" + (f"; did you mean LEDGER_{near[0]}?" if near else
                                                           " (docs/settings.md lists them)"))
    return lines

