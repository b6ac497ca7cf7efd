"""`ledger timeline DAG`: the chain of runs, what replaced what, where versions and schedules changed."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.env import open_env, print_json
from cli.options import DagId, Json
from ledger.dates import iso, iso_raw, local_text, parse_user_date
from ledger.errors import DagNotFound, InvalidInput
from ledger.models import Dag
from ledger.store import runs as run_store

out = Console()

STATE_STYLE = {"success": "green", "failed": "red", "running": "cyan", "queued": "blue",
               "overridden": "dim strike"}


def _sid(value: int | None) -> str | None:
    return None if value is None else str(value)


def run_json(r: Any, stamp: Any = iso) -> dict[str, Any]:
    """The stable JSON shape of a run; `stamp` formats timestamps (iso_raw for raw timeline rows)."""
    return {
        "run_id": str(r.id), "logical_date": stamp(r.logical_date),
        "data_interval_start": stamp(r.data_interval_start), "data_interval_end": stamp(r.data_interval_end),
        "run_type": r.run_type, "state": r.state, "previous_run_id": _sid(r.previous_run_id),
        "dag_version": r.version_hash, "overridden_by": _sid(r.overridden_by), "backfill_id": _sid(r.backfill_id),
        "schedule": r.schedule, "created_at": stamp(r.created_at), "started_at": stamp(r.started_at),
        "ended_at": stamp(r.ended_at), "overridden_at": stamp(r.overridden_at),
    }


def timeline_json(rows: list[Any]) -> list[dict[str, Any]]:
    """run_json over raw timeline rows, unrolled: 100,000 runs must print in well under 2 s."""
    t = iso_raw
    out = []
    for (run_id, logical, start, end, run_type, state, previous, version, by, backfill_id, schedule, created,
         started, ended, overridden_at, _holder) in rows:
        out.append({
            "run_id": str(run_id), "logical_date": t(logical), "data_interval_start": t(start),
            "data_interval_end": t(end), "run_type": run_type, "state": state,
            "previous_run_id": None if previous is None else str(previous), "dag_version": version,
            "overridden_by": None if by is None else str(by),
            "backfill_id": None if backfill_id is None else str(backfill_id), "schedule": schedule,
            "created_at": t(created), "started_at": t(started), "ended_at": t(ended), "overridden_at": t(overridden_at),
        })
    return out


def timeline(
    dag_id: DagId,
    start: Annotated[str | None, typer.Option(help="Earliest logical date shown.")] = None,
    end: Annotated[str | None, typer.Option(help="Latest logical date shown.")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also show overridden runs as rows.")] = False,
    as_json: Json = False,
) -> None:
    """The DAG's runs in chain order, with overrides, version and schedule changes."""
    env = open_env()
    with env.reading() as session:
        dag = session.get(Dag, dag_id)
        if dag is None:
            raise DagNotFound(dag_id)
        lo = parse_user_date(start, timezone=dag.timezone, what="--start") if start else None
        hi = parse_user_date(end, timezone=dag.timezone, what="--end") if end else None
        if lo is not None and hi is not None and hi < lo:
            raise InvalidInput(f"--end {end} is before --start {start}")
        rows = run_store.timeline_rows(session, dag_id, start=lo, end=hi)
    if as_json:
        print_json(timeline_json(rows))
        return
    render(dag_id, dag.timezone, rows, show_all=show_all)


def render(dag_id: str, timezone: str, rows: list[Any], *, show_all: bool) -> None:
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
        table.add_row(local_text(iso_raw(r.logical_date), timezone), str(r.id), r.run_type,
                      Text(r.state, style=STATE_STYLE.get(r.state, "")), str(r.previous_run_id or "-"),
                      r.version_hash[:8], "; ".join(notes))
    out.print(table)
    overridden = sum(1 for r in rows if r.state == "overridden")
    out.print(f"{live} live run(s), {overridden} overridden", highlight=False)


def _local(raw: Any, timezone: str) -> str:
    return local_text(iso_raw(raw), timezone)
