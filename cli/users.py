"""`ledger users create|list|delete|set-role|token|revoke-token`: who may sign in to the web view."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json
from ledger.cli.options import Json, form_checked
from ledger.services import users
from ledger.store import users as user_store

app = typer.Typer(help="Users of the web view and their roles (viewer, operator, admin) and API tokens.",
                  no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)

Name = Annotated[str, typer.Argument(help="The user name.", show_default=False)]
RoleOption = Annotated[str, typer.Option(help="viewer (reads), operator (also acts on runs, DAGs and "
                                              "backfills) or admin (also users, variables, connections, "
                                              "pools).", show_default=False)]


def _password() -> str:
    """The password: typed twice at a terminal, else the first line of standard input."""
    if sys.stdin.isatty():
        return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))
    return sys.stdin.readline().rstrip("\r\n")


@app.command()
def create(username: Name, role: RoleOption = "viewer") -> None:
    """Add a user; the password is asked for (or read from standard input's first line)."""
    with form_checked():
        users.check_username(username)
        users.role_of(role)
    password = _password()
    env = open_env()
    with env.transaction() as session:
        users.create(session, username, password, role, now=env.clock.now(), actor=env.actor)
    out.print(f"user {username} created ({role})")


@app.command("list")
def list_(as_json: Json = False) -> None:
    """The users, their roles and how many API tokens each has."""
    env = open_env()
    with env.reading() as session:
        rows: list[dict[str, Any]] = [{"username": u.username, "role": u.role, "tokens": n,
                                       "created_at": u.created_at.isoformat()}
                for u, n in user_store.listing(session)]
    if as_json:
        print_json(rows)
        return
    table = Table("user", "role", "tokens", "created")
    for r in rows:
        table.add_row(r["username"], r["role"], str(r["tokens"]), r["created_at"])
    out.print(table)


@app.command()
def delete(username: Name) -> None:
    """Remove a user and its API tokens; its signed-in sessions end."""
    env = open_env()
    with env.transaction() as session:
        users.delete(session, username, now=env.clock.now(), actor=env.actor)
    out.print(f"user {username} deleted")


@app.command("set-role")
def set_role(username: Name, role: Annotated[str, typer.Argument(help="viewer, operator or admin.",
                                                                  show_default=False)]) -> None:
    """Change a user's role."""
    with form_checked():
        users.role_of(role)
    env = open_env()
    with env.transaction() as session:
        before = users.set_role(session, username, role, now=env.clock.now(), actor=env.actor)
    out.print(f"user {username}: {before} → {role}")


@app.command()
def token(username: Name, name: Annotated[str, typer.Option(help="A name for the token.")] = "default") -> None:
    """Make an API token for scripts (`Authorization: Bearer TOKEN`), printed once: only its hash is kept."""
    with form_checked():
        users.check_token_name(name)
    env = open_env()
    with env.transaction() as session:
        made = users.new_token(session, username, name, now=env.clock.now(), actor=env.actor)
    sys.stdout.write(made + "\n")


@app.command("revoke-token")
def revoke_token(username: Name, name: Annotated[str, typer.Option(help="The token's name.")] = "default") -> None:
    """Revoke one of a user's API tokens."""
    env = open_env()
    with env.transaction() as session:
        users.revoke_token(session, username, name, now=env.clock.now(), actor=env.actor)
    out.print(f"token {name} of {username} revoked")
