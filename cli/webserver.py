"""`ledger webserver`: the read-only web view and JSON API (ledger.web), served by uvicorn."""

from __future__ import annotations

import gc
import ipaddress
import os
from typing import Annotated

import typer

from ledger.config import load_settings
from ledger.errors import ConfigError

TOKEN_VARIABLE = "LEDGER_WEB_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def webserver(
    host: Annotated[str, typer.Option(help="The address to listen on; another than loopback needs "
                                           "LEDGER_WEB_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8793,
) -> None:
    """Serve the ledger in a browser, read-only, and its JSON API.

    Pages: DAGs, timelines, runs, versions, lineage, backfills, events, signals. Under /api/v1 the same
    documents as `--json` (OpenAPI at /api/docs). Reads the database only; never imports DAG files. With
    LEDGER_WEB_TOKEN set, every request must carry the token."""
    import uvicorn

    from ledger.web.app import create_app

    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not is_loopback(host):
        raise ConfigError(f"refusing to serve on {host}, which is not a loopback address, without a token: set "
                          f"{TOKEN_VARIABLE}, or bind 127.0.0.1")
    app = create_app(load_settings(), token=token)  # refuses a database that is missing or not upgraded
    # the objects made by imports and start-up are kept for the process's life: freezing them spares the first
    # requests a full garbage collection over them (about 200 ms)
    gc.collect()
    gc.freeze()
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"ledger webserver: http://{shown}:{port}/ (read-only; API at /api/v1, OpenAPI at /api/docs)"
               + (f"; requests need {TOKEN_VARIABLE}" if token else ""))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
