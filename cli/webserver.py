"""`ledger webserver`: the web view, its JSON API and write API (ledger.web), served by uvicorn."""

from __future__ import annotations

import gc
import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from ledger.cli.options import check_environment
from ledger.core.errors import ConfigError
from ledger.infra.config import load_settings
from ledger.infra.settings import value as setting
from ledger.store import users as user_store

TOKEN_VARIABLE = "LEDGER_WEB_TOKEN"
WORKER_TOKEN_VARIABLE = "LEDGER_WORKER_TOKEN"
SECURE_VARIABLE = "LEDGER_WEB_SECURE_COOKIES"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def webserver(
    host: Annotated[str, typer.Option(help="The address to listen on; another than loopback needs users "
                                           "(`ledger users create`) or LEDGER_WEB_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8793,
    tls_cert: Annotated[Path | None, typer.Option(help="Serve HTTPS with this certificate (PEM); cookies are "
                                                       "then Secure.", exists=True, dir_okay=False)] = None,
    tls_key: Annotated[Path | None, typer.Option(help="The private key of --tls-cert (PEM).", exists=True,
                                                 dir_okay=False)] = None,
) -> None:
    """Serve the ledger in a browser, its JSON API and its write API.

    Pages: DAGs, timelines, runs, versions, lineage, backfills, events, signals, and (for operators) the
    actions: trigger, clear, mark, cancel, pause, backfill. Under /api/v1 the same documents as `--json` and
    the actions as POST (OpenAPI at /api/docs). Never imports DAG files. With users defined, every request
    needs a signed-in user or an API token; LEDGER_WEB_TOKEN is a shared token that reads."""
    import uvicorn

    from ledger.web.app import create_app
    from ledger.web.auth import allowed_hosts

    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together", param_hint="'--tls-cert'")
    token = setting(TOKEN_VARIABLE)
    worker_token = setting(WORKER_TOKEN_VARIABLE)
    check_environment()
    settings = load_settings()
    secure = tls_cert is not None or bool(setting(SECURE_VARIABLE))
    app = create_app(settings, token=token, secure_cookies=secure,  # refuses a database not upgraded
                     hosts=allowed_hosts(extra=(host,) if host not in ("0.0.0.0", "::") else ()),
                     worker_token=worker_token)
    if token is None and not is_loopback(host):
        with app.state.reader.session() as session:
            if user_store.count(session) == 0:
                raise ConfigError(f"refusing to serve on {host}, which is not a loopback address, without users "
                                  f"or a token: `ledger users create NAME --role admin`, set {TOKEN_VARIABLE}, or "
                                  "bind 127.0.0.1")
    # the objects made by imports and start-up are kept for the process's life: freezing them spares the first
    # requests a full garbage collection over them
    gc.collect()
    gc.freeze()
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls_cert is not None else "http"
    typer.echo(f"ledger webserver: {scheme}://{shown}:{port}/ (API at /api/v1, OpenAPI at /api/docs)"
               + (f"; reading needs {TOKEN_VARIABLE} or a user" if token else ""))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                ssl_certfile=str(tls_cert) if tls_cert else None, ssl_keyfile=str(tls_key) if tls_key else None)
