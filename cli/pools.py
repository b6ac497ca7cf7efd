"""`ledger pools set|list|delete`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json
from ledger.cli.options import MAX_ID, Json
from ledger.services.operations import delete_pool, set_pool
from ledger.store import pools as pool_store

app = typer.Typer(help="Pools limit the task instances that run at once across DAGs (each takes its pool_slots).",
                  no_args_is_help=True)
out = Console(highlight=False)

Name = Annotated[str, typer.Argument(help="The pool name.", show_default=False)]


@app.command("set", context_settings={"ignore_unknown_options": True})  # `-1` is a (bad) number, not an option
def set_(name: Name, slots: Annotated[int, typer.Argument(
        help="How many slots its task instances may take at once (each takes its pool_slots, default 1).")],
         description: Annotated[str, typer.Option(help="What the pool is for.")] = "") -> None:
    """Create a pool or change its slots. Tasks name their pool with `pool=`; a pool that is not
    defined does not limit anything."""
    if not name.strip():
        raise typer.BadParameter("a pool needs a name", param_hint="'NAME'")
    if not 0 <= slots <= MAX_ID:
        raise typer.BadParameter(f"slots must be 0 or more, up to {MAX_ID}, not {slots}", param_hint="'slots'")
    env = open_env()
    with env.transaction() as session:
        set_pool(session, name, slots, description, now=env.clock.now(), actor=env.actor)
    out.print(f"pool {name} has {slots} slot(s)")


@app.command("list")
def list_(as_json: Json = False) -> None:
    """Pools with their slots and how many are in use."""
    env = open_env()
    with env.reading() as session:
        rows = pool_store.pool_rows(session)
    if as_json:
        print_json(rows)
        return
    table = Table("pool", "slots", "used", "description")
    for r in rows:
        table.add_row(r["name"], str(r["slots"]), str(r["used"]), r["description"])
    out.print(table)


@app.command()
def delete(name: Name) -> None:
    """Delete a pool; its tasks are no longer limited."""
    env = open_env()
    with env.transaction() as session:
        delete_pool(session, name, now=env.clock.now(), actor=env.actor)
    out.print(f"pool {name} deleted")
