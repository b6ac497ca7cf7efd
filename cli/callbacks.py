"""`ledger callbacks`: every callback and notifier call, with its outcome."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json, refuse_unknown_filters
from ledger.cli.options import Json, id_parser, within_range
from ledger.core.dates import local_text
from ledger.store import callbacks as callback_store

out = Console(highlight=False)


def callbacks(
    dag: Annotated[str | None, typer.Option("--dag", help="Only calls of this DAG.")] = None,
    run: Annotated[int | None, typer.Option("--run", help="Only calls of this run.", parser=id_parser("run id"),
                                          show_default=False)] = None,
    limit: Annotated[int, typer.Option(min=1, callback=within_range, help="Only the newest N calls.")] = 100,
    as_json: Json = False,
) -> None:
    """Callback and notifier calls: what each was called for (a try failed, a run ended, a deadline
    passed), what was called (as the run's version records it), and how it ended (pending, running, ok,
    error, timeout, lost). Each outcome is also an event (callback_ok, callback_error, ...)."""
    env = open_env()
    with env.reading() as session:
        refuse_unknown_filters(session, dag, run)
        rows = [callback_store.as_json(c) for c in callback_store.listing(session, dag_id=dag, run_id=run,
                                                                          limit=limit)]
    if as_json:
        print_json(rows)
        return
    table = Table("id", "dag", "run", "task", "try", "for", "called", "outcome", "ended", "message")
    for r in rows:
        table.add_row(str(r["id"]), r["dag_id"], r["run_id"], r["task_id"] or "-", str(r["try_number"] or "-"),
                      r["kind"], r["target"], r["state"], local_text(r["ended_at"], "UTC") or "-",
                      r["message"] or "")
    out.print(table)
