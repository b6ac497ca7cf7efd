"""`ledger events`: the append-only audit log."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from cli.env import open_env, print_json, refuse_unknown_filters
from cli.options import Json
from ledger.store import events as event_store

out = Console()


def events(
    dag: Annotated[str | None, typer.Option("--dag", help="Only events of this DAG.")] = None,
    run: Annotated[int | None, typer.Option("--run", help="Only events of this run.")] = None,
    task: Annotated[str | None, typer.Option(
        "--task", help="Only events about this task (its tries, marks, clears, signals).")] = None,
    kind: Annotated[list[str] | None, typer.Option("--kind", help="Only events of this kind (repeatable).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the newest N events.")] = None,
    task_signals: Annotated[bool, typer.Option(
        "--task-signals/--no-task-signals",
        help="List task state signals (kind task_state_signal) among the events.")] = True,
    as_json: Json = False,
) -> None:
    """Every recorded change: runs created, spliced, overridden, state changes, locks, versions, signals.

    Signals sent with `ledger signal send` or by tasks are `signal_sent` events, the actions the scheduler
    took on them `signal_action`. Task state changes are listed as `task_state_signal` rows, read from the
    signal table: they have no event id (their signal id is in the details)."""
    env = open_env()
    with env.reading() as session:
        refuse_unknown_filters(session, dag, run)
        rows = event_store.listing_json(session, dag_id=dag, run_id=run, kinds=kind, limit=limit,
                                        task_signals=task_signals, task_id=task)
    if as_json:
        print_json(rows)
        return
    table = Table("id", "at", "kind", "actor", "dag", "run", "details")
    for e in rows:
        table.add_row("" if e["id"] is None else str(e["id"]), e["at"], e["kind"], e["actor"], e["dag_id"] or "",
                      e["run_id"] or "", json.dumps(e["details"], ensure_ascii=False))
    out.print(table)
