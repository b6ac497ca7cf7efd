"""`ledger timeline DAG`: the chain of runs, what replaced what, where versions and schedules changed."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ledger.cli.env import open_env, print_json
from ledger.cli.options import DagId, Json, checked_date, usage_error
from ledger.core.dates import iso_raw, local_text
from ledger.core.errors import DagNotFound, InvalidInput
from ledger.services.dataset_docs import timeline_marks, with_marks
from ledger.services.documents import timeline_json, timeline_range
from ledger.store import dags as dag_store
from ledger.store import runs as run_store

out = Console()

STATE_STYLE = {"success": "green", "failed": "red", "running": "cyan", "queued": "blue",
               "overridden": "dim strike"}


def timeline(
    dag_id: DagId,
    start: Annotated[str | None, typer.Option(help="Earliest logical date shown.", callback=checked_date)] = None,
    end: Annotated[str | None, typer.Option(help="Latest logical date shown (a date without a time: all of that day).",
                                             callback=checked_date)] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also show overridden runs as rows.")] = False,
    as_json: Json = False,
) -> None:
    """The DAG's runs in chain order, with overrides, version and schedule changes."""
    env = open_env()
    with env.reading() as session:
        dag = dag_store.find(session, dag_id)
        if dag is None:
            raise DagNotFound(dag_id)
        try:
            lo, hi = timeline_range(dag, start, end)
        except InvalidInput as exc:  # the dates alone are wrong (a backwards range): a usage error
            raise usage_error(str(exc)) from None
        rows = run_store.timeline_rows(session, dag_id, start=lo, end=hi)
        marks = timeline_marks(session, dag_id)
    if as_json:
        print_json(with_marks(timeline_json(rows), marks))
        return
    render(dag_id, dag.timezone, rows, show_all=show_all, marks=marks)


def render(dag_id: str, timezone: str, rows: list[Any], *, show_all: bool,
           marks: dict[int, dict[str, Any]] | None = None) -> None:
    replaced: dict[int, list[Any]] = {}
    for r in rows:
        if r.overridden_by is not None:
            replaced.setdefault(r.overridden_by, []).append(r)
    table = Table(title=f"timeline of {dag_id} ({timezone})", title_justify="left")
    table.add_column("logical date", no_wrap=True)  # with its offset: two 02:00 of one night read differently
    for col in ("run", "type", "state", "previous", "version", "notes"):
        table.add_column(col)
    last_version = last_schedule = None
    live = 0
    for r in rows:
        is_live = r.state != "overridden"
        if not is_live and not show_all:
            continue
        notes: list[str] = []
        if is_live:
            live += 1
            if last_version is not None and r.version_hash != last_version:
                notes.append(f"◆ version {last_version[:8]} → {r.version_hash[:8]}")
            if last_schedule is not None and r.schedule != last_schedule:
                notes.append(f"◆ schedule {last_schedule} → {r.schedule}")
            last_version, last_schedule = r.version_hash, r.schedule
            for old in replaced.get(r.id, []):
                notes.append(f"replaced run {old.id} ({old.run_type}, v {old.version_hash[:8]}) at "
                             f"{_local(old.overridden_at, timezone)}")
        else:
            notes.append(f"overridden by run {r.overridden_by}")
        notes += mark_notes((marks or {}).get(r.id))
        table.add_row(local_text(iso_raw(r.logical_date), timezone), str(r.id), r.run_type,
                      Text(r.state, style=STATE_STYLE.get(r.state, "")), str(r.previous_run_id or "-"),
                      r.version_hash[:8], "; ".join(notes))
    out.print(table)
    overridden = sum(1 for r in rows if r.state == "overridden")
    out.print(f"{live} live run(s), {overridden} overridden", highlight=False)


def mark_notes(mark: dict[str, Any] | None) -> list[str]:
    """A consumer run's notes: the upstream writes it re-ran for, the write that made it stale."""
    if not mark:
        return []
    notes = [f"re-run: {_write_text(e)}" for e in mark.get("rerun_because", [])]
    if "stale_because" in mark:
        notes.append(f"⚠ stale: {_write_text(mark['stale_because'])}")
    return notes


def _write_text(e: dict[str, Any]) -> str:
    w = e["written_by"]
    by = f"run {w['run_id']} of {w['dag_id']}" + (f" (backfill {w['backfill_id']})" if w["backfill_id"] else "")
    return f"{e['dataset']} {e['partition'] or ''} rewritten by {by}".replace("  ", " ")


def _local(raw: Any, timezone: str) -> str:
    return local_text(iso_raw(raw), timezone)
