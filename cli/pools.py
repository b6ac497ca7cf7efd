"""`ledger pools set|list|delete`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import func, select

from cli.env import open_env, print_json
from cli.options import Json
from ledger.errors import InvalidInput
from ledger.models import Pool, TaskInstance
from ledger.store import events
from ledger.store.tasks import ACTIVE

app = typer.Typer(help="Pools limit how many task instances run at once across DAGs.", no_args_is_help=True)
out = Console(highlight=False)

Name = Annotated[str, typer.Argument(help="The pool name.", show_default=False)]


@app.command("set", context_settings={"ignore_unknown_options": True})  # `-1` is a (bad) number, not an option
def set_(name: Name, slots: Annotated[int, typer.Argument(help="How many task instances may run at once.")],
         description: Annotated[str, typer.Option(help="What the pool is for.")] = "") -> None:
    """Create a pool or change its slots. Tasks name their pool with `pool=`; a pool that is not
    defined does not limit anything."""
    if not name.strip():
        raise InvalidInput("a pool needs a name")
    if slots < 0:
        raise typer.BadParameter(f"slots must be 0 or more, not {slots}", param_hint="'slots'")
    env = open_env()
    with env.transaction() as session:
        pool = session.get(Pool, name)
        if pool is None:
            session.add(Pool(name=name, slots=slots, description=description))
        else:
            pool.slots, pool.description = slots, description or pool.description
        events.record(session, "pool_set", at=env.clock.now(), actor=env.actor, pool=name, slots=slots)
    out.print(f"pool {name} has {slots} slot(s)")


@app.command("list")
def list_(as_json: Json = False) -> None:
    """Pools with their slots and how many are in use."""
    env = open_env()
    with env.transaction() as session:
        in_use = (select(TaskInstance.pool, func.count()).where(TaskInstance.state.in_(ACTIVE))
                  .group_by(TaskInstance.pool))
        used = dict(session.execute(in_use).tuples().all())
        rows = [{"name": p.name, "slots": p.slots, "used": used.get(p.name, 0), "description": p.description}
                for p in session.scalars(select(Pool).order_by(Pool.name))]
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
        pool = session.get(Pool, name)
        if pool is None:
            raise InvalidInput(f"no pool named {name!r}; see `ledger pools list`")
        session.delete(pool)
        events.record(session, "pool_deleted", at=env.clock.now(), actor=env.actor, pool=name)
    out.print(f"pool {name} deleted")
