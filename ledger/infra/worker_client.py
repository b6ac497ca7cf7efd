"""Where task code reaches the ledger from, and the client for tries that have no database: ledger's webserver's
worker API (ledger/web/worker_api.py), with the workers' credential (LEDGER_WORKER_TOKEN).

`reach()` decides, from the environment alone (no database is opened, none is ever created): the database of this
process's environment when the try has it (LEDGER_DATABASE_URL names a server, or the SQLite file exists: a
scheduler's try), else the webserver when LEDGER_API_URL is set (a `ledger worker`'s try), else it refuses with one
line. ledger/sdk/ledger_client.py opens the client it names; the database's is ledger/services/task_calls.py.

Each call is one HTTP request, not retried: a signal or a trigger the webserver committed before the answer was lost
must not be made twice. Answers are mapped back to the errors the database's client raises (409 TimelineConflict,
404 NotFound, 400 InvalidInput); a webserver that cannot be asked or refuses the credential is a ConfigError."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.core.errors import ConfigError, InvalidInput, LedgerError, NotFound, TimelineConflict
from ledger.core.signals import Signal
from ledger.infra.config import load_settings
from ledger.infra.workers import API_VARIABLE, TOKEN_VARIABLE

TASK_ACTOR = "task:"  # how the actor of what a try does starts: the API acts for tries only
TIMEOUT = 30.0  # seconds a request may take

# told how each call went: the webserver's error when it could not be reached or failed (the fleet's fault), None
# when it answered. `ledger worker` sets it in its pool processes before it forks a try (a fault of the fleet is said
# and counted by the worker: scheduler/executors/fleet_faults.py, Relay); elsewhere nobody listens
on_call: Callable[[str | None], None] | None = None

# a run's state and its task instances' states by task id (every instance of a mapped task)
RunStates = tuple[str, dict[str, list[str]]]


def try_actor(dag_id: str, task_id: str, run_id: object, try_number: int) -> str:
    """The sender of a try's signals and the actor of the runs it triggers: the record says which try did it."""
    return f"{TASK_ACTOR}{dag_id}.{task_id}@run {run_id} try {try_number}"


@dataclass(frozen=True)
class Triggered:
    run_id: int
    logical_date: datetime
    replaced_run_id: int | None  # the live run at that date the new one overrode (reset_dag_run)


@dataclass(frozen=True)
class Place:
    """Where a try reaches the ledger: `kind` DATABASE (`url` its database URL) or API (`url` the webserver's)."""

    kind: str
    url: str
    token: str = ""


DATABASE, API = "database", "api"


def _sqlite_file(url: str) -> str | None:
    """The file of a `sqlite:///PATH` URL (None: not SQLite, or in memory), read as SQLAlchemy reads it."""
    scheme, _, rest = url.partition("://")
    if scheme.split("+")[0].lower() != "sqlite":
        return None
    path = rest[1:].partition("?")[0] if rest.startswith("/") else ""
    return path if path and path != ":memory:" else None


class NoLedger(ConfigError):
    """Neither a database nor ledger's webserver is where this process could reach them."""


def reach(env: Mapping[str, str] | None = None) -> Place:
    """Where this process's task code reaches the ledger (see the module docstring); ConfigError when nowhere."""
    env = dict(os.environ) if env is None else dict(env)
    url = load_settings(env).database_url
    path = _sqlite_file(url)
    if path is None or os.path.exists(path):
        return Place(DATABASE, url)
    api = (env.get(API_VARIABLE) or "").strip().rstrip("/")
    if api:
        return Place(API, api, (env.get(TOKEN_VARIABLE) or "").strip())
    raise NoLedger(f"this try cannot reach the ledger: there is no database at {path} and no {API_VARIABLE}; a "
                      f"try on a worker reaches ledger's webserver (start `ledger worker` with {API_VARIABLE} and "
                      f"{TOKEN_VARIABLE})")


class WorkerClient:
    """The ledger as task code reaches it over ledger's webserver (GET and POST under /api/v1/worker/)."""

    def __init__(self, api: str, token: str) -> None:
        self.api, self.token = api.rstrip("/"), token

    def _call(self, what: str, path: str, body: dict[str, Any] | None = None,
              query: dict[str, str] | None = None) -> Any:
        url = f"{self.api}/api/v1/worker/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        # loaded here, when task code calls the webserver (a remote try), not by every process that imports this
        # module: a LocalExecutor worker forks each try, and a fork costs in proportion to what it holds (issue 43)
        from urllib import error as url_error
        from urllib import request as url_request

        request = url_request.Request(url, data=data, headers=headers, method="GET" if body is None else "POST")
        try:
            with url_request.urlopen(request, timeout=TIMEOUT) as response:
                answer = json.loads(response.read())
        except url_error.HTTPError as exc:
            refused = _refusal(exc, what, self.api)
            _noted(f"HTTP {exc.code}" if exc.code >= 500 or exc.code in (408, 429) else None)
            raise refused from None
        except (OSError, ValueError) as exc:  # refused, reset, timed out; an answer cut short
            _noted(f"{type(exc).__name__}: {exc}")
            raise ConfigError(f"cannot {what} through ledger's webserver at {self.api}: {exc}") from None
        _noted(None)
        return answer

    def send_signal(self, key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
        sent = self._call(f"send signal {key!r}", "signals",
                          {"key": key, "value": value, "meta": meta, "sender": sender})
        return Signal(int(sent["id"]), sent["key"], int(sent["version"]), sent["value"], sent["sender"],
                      datetime.fromisoformat(sent["sent_at"]), sent.get("meta"))

    def trigger_run(self, dag_id: str, at: datetime, conf: dict[str, Any], *, replace: bool,
                    actor: str) -> Triggered:
        done = self._call(f"trigger {dag_id}", f"dags/{_quoted(dag_id)}/runs",
                          {"logical_date": at.isoformat(), "conf": conf, "replace": replace, "actor": actor})
        replaced = done.get("replaced_run_id")
        return Triggered(int(done["run_id"]), datetime.fromisoformat(done["logical_date"]),
                         int(replaced) if replaced is not None else None)

    def run_state(self, run_id: int) -> str:
        return str(self._call(f"read run {run_id}", f"runs/{int(run_id)}")["state"])

    def states_at(self, dag_id: str, at: datetime) -> RunStates | None:
        found = self._call(f"read the run of {dag_id}", f"dags/{_quoted(dag_id)}/states", query={"at": at.isoformat()})
        if found.get("run_state") is None:
            return None
        return str(found["run_state"]), {str(t): [str(s) for s in states] for t, states in found["tasks"].items()}

    def variable(self, key: str) -> str | None:
        try:
            return str(self._call(f"read variable {key!r}", f"variables/{_quoted(key)}")["value"])
        except NotFound:
            return None

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._call(f"read connection {conn_id!r}", f"connections/{_quoted(conn_id)}")
        except NotFound:
            return None
        return found


def _noted(error: str | None) -> None:
    """Tell on_call how a call went (a listener's own failure never fails the task's call)."""
    if on_call is not None:
        with contextlib.suppress(Exception):
            on_call(error)


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _refusal(exc: Any, what: str, api: str) -> LedgerError:
    """The error the database's client would have raised for the webserver's answer."""
    try:
        message = str(json.loads(exc.read()).get("message", ""))
    except (ValueError, AttributeError, OSError):
        message = ""
    if exc.code == 409:
        return TimelineConflict(message)
    if exc.code == 404 and message:
        return NotFound(message)
    if exc.code == 400:
        return InvalidInput(message)
    return ConfigError(f"cannot {what} through ledger's webserver at {api}: HTTP {exc.code} {message}".strip())
