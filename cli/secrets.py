"""`ledger variables set|get|list|delete` and `ledger connections add|get|list|delete`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json
from ledger.cli.options import Json, form_checked
from ledger.core.dates import iso
from ledger.core.errors import InvalidInput
from ledger.infra.fernet import decrypt
from ledger.sdk.connections import ConnectionInfo
from ledger.services.operations import connection_json, delete_secret, secret_name, set_connection, set_variable
from ledger.store import secrets as store

variables = typer.Typer(help="Named values for DAGs ({{ var.value.NAME }}, Variable.get), stored encrypted.",
                        no_args_is_help=True)
connections = typer.Typer(help="How DAGs reach other systems ({{ conn.ID.host }}, get_connection), passwords "
                               "stored encrypted.", no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)
Key = Annotated[str, typer.Argument(help="The variable's name.", show_default=False)]
ConnId = Annotated[str, typer.Argument(help="The connection id.", show_default=False)]


@variables.command("set")
def variable_set(key: Key, value: Annotated[str, typer.Argument(help="Its value (text; JSON for var.json).",
                                                                show_default=False)],
                 description: Annotated[str, typer.Option(help="What it is for.")] = "") -> None:
    """Create or change a variable (its value is stored encrypted).

    Encrypted with the Fernet key: LEDGER_FERNET_KEY, or the key file in LEDGER_HOME, made on first use."""
    with form_checked():
        secret_name(key, "variable")
    env = open_env()
    with env.transaction() as session:
        new = set_variable(session, key, value, description, now=env.clock.now(), actor=env.actor)
    out.print(f"variable {key} {'created' if new else 'changed'}")


@variables.command("get")
def variable_get(key: Key) -> None:
    """Print a variable's value."""
    env = open_env()
    with env.reading() as session:
        row = store.variable(session, key)
        if row is None:
            raise InvalidInput(f"no variable named {key!r}; see `ledger variables list`")
        sealed = row.value_encrypted
    typer.echo(decrypt(sealed))


@variables.command("list")
def variable_list(as_json: Json = False) -> None:
    """Variables by name, without their values."""
    env = open_env()
    with env.reading() as session:
        rows = [{"key": v.key, "description": v.description, "updated_at": iso(v.updated_at)}
                for v in store.variables(session)]
    if as_json:
        print_json(rows)
        return
    table = Table("key", "description", "updated")
    for r in rows:
        table.add_row(r["key"], r["description"], r["updated_at"])
    out.print(table)


@variables.command("delete")
def variable_delete(key: Key) -> None:
    _delete("variable", key)


def _delete(kind: str, name: str) -> None:
    env = open_env()
    with env.transaction() as session:
        delete_secret(session, kind, name, now=env.clock.now(), actor=env.actor)
    out.print(f"{kind} {name} deleted")


@connections.command("add")
def connection_add(conn_id: ConnId,
                   uri: Annotated[str, typer.Option(help="postgresql://user:password@host:5432/db?opt=1",
                                                    show_default=False)],
                   description: Annotated[str, typer.Option(help="What it is for.")] = "") -> None:
    """Create or change a connection from a URI (its password and extra are encrypted)."""
    with form_checked():
        ConnectionInfo.from_uri(secret_name(conn_id, "connection"), uri)
    env = open_env()
    with env.transaction() as session:  # encrypted once the database is known to be there (the key file is made then)
        new = set_connection(session, conn_id, uri, description, now=env.clock.now(), actor=env.actor)
    out.print(f"connection {conn_id} {'created' if new else 'changed'}")


@connections.command("get")
def connection_get(conn_id: ConnId, as_json: Json = False) -> None:
    """A connection, its password and extra shown as ***."""
    env = open_env()
    with env.reading() as session:
        row = store.connection(session, conn_id)
        if row is None:
            raise InvalidInput(f"no connection named {conn_id!r}; see `ledger connections list`")
        doc = connection_json(row)
    if as_json:
        print_json(doc)
        return
    for name, value in doc.items():
        out.print(f"{name:12} {'' if value is None else value}")


@connections.command("list")
def connection_list(as_json: Json = False) -> None:
    """Connections, their passwords and extras shown as ***."""
    env = open_env()
    with env.reading() as session:
        rows = [connection_json(c) for c in store.connections(session)]
    if as_json:
        print_json(rows)
        return
    table = Table("conn_id", "type", "host", "port", "login", "schema", "password", "description")
    for r in rows:
        table.add_row(r["conn_id"], r["conn_type"], r["host"] or "", str(r["port"] or ""), r["login"] or "",
                      r["schema"] or "", r["password"] or "", r["description"])
    out.print(table)


@connections.command("delete")
def connection_delete(conn_id: ConnId) -> None:
    _delete("connection", conn_id)
