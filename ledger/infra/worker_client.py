"""What a try running on a Celery worker asks ledger's webserver for, instead of the database it cannot reach:
variables and connections (`GET /api/v1/worker/variables/KEY`, `/api/v1/worker/connections/ID`, with
LEDGER_WORKER_TOKEN; ledger/web/worker_api.py). A try is on a worker when `ledger worker` started its process
(LEDGER_WORKER_NAME is set) and the worker knows the webserver (LEDGER_API_URL)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ledger.core.errors import ConfigError
from ledger.infra.workers import API_VARIABLE, NAME_VARIABLE, TOKEN_VARIABLE


def on_worker() -> bool:
    return bool(os.environ.get(NAME_VARIABLE)) and bool((os.environ.get(API_VARIABLE) or "").strip())


def fetch(kind: str, name: str) -> dict[str, Any] | None:
    """The JSON document of a variable (`kind` "variables") or a connection ("connections"); None: the webserver
    has none of that name. ConfigError when the webserver cannot be asked or refuses."""
    api = (os.environ.get(API_VARIABLE) or "").strip().rstrip("/")
    token = (os.environ.get(TOKEN_VARIABLE) or "").strip()
    url = f"{api}/api/v1/worker/{kind}/{urllib.parse.quote(name, safe='')}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            found: dict[str, Any] = json.loads(response.read())
            return found
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        try:
            message = json.loads(exc.read()).get("message", "")
        except (ValueError, AttributeError, OSError):
            message = ""
        raise ConfigError(f"cannot read {kind[:-1]} {name!r} from {api}: HTTP {exc.code} {message}".strip()) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {kind[:-1]} {name!r} from {api}: {exc}") from None
