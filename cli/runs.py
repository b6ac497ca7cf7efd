"""`ledger runs show RUN`: a run as it was, with its own version's graph and its task instances; `ledger runs list`:
the runs of every DAG filtered by state, type, DAG and date."""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.cli.env import open_env, print_json
from ledger.cli.options import (
    Json,
    Reason,
    RunId,
    checked_date,
    form_checked,
    id_parser,
    reason_text,
    within_range,
)
from ledger.core.mapping import label
from ledger.services.run_document import run_document

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Inspect DAG runs.", no_args_is_help=True)


@cache
def console() -> Console:
    """Where the text output goes (rich, loaded by the first command that prints text: `--json` never does)."""
    from rich.console import Console

    return Console()


@app.command("list")
def list_runs(
    state: Annotated[list[str] | None, typer.Option("--state", help="Only runs in this state (repeatable): queued, "
                                                    "running, success, failed, overridden.")] = None,
    run_type: Annotated[list[str] | None, typer.Option("--type", help="Only runs of this type (repeatable): "
                                                       "scheduled, backfill, manual, test, dataset_triggered.")] = None,
    dag: Annotated[str | None, typer.Option("--dag", help="Only this DAG's runs.")] = None,
    start: Annotated[str | None, typer.Option("--start", callback=checked_date,
                                              help="Logical dates from (UTC; a bare date: that day).")] = None,
    end: Annotated[str | None, typer.Option("--end", callback=checked_date,
                                            help="Logical dates to, that day included (UTC).")] = None,
    limit: Annotated[int, typer.Option(min=1, callback=within_range, help="The newest N runs.")] = 100,
    before: Annotated[int | None, typer.Option(
        "--before", parser=id_parser("run id"), show_default=False,
        help="Only runs older than this run id (the next page: the last id listed).")] = None,
    as_json: Json = False,
) -> None:
    """The runs of every DAG, newest first, filtered by state, type, DAG and logical date (what the web's state
    counts link to)."""
    from ledger.services.documents import runs_list_document

    env = open_env()
    with env.reading() as session, form_checked():  # (an unknown state or type, a backwards range: exit 2)
        rows, older = runs_list_document(session, states=state or [], run_types=run_type or [], dag_id=dag,
                                         start=start, end=end, before=before, limit=limit)
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("run", "dag", "logical date", "type", "state", "started", "ended")
    for r in rows:
        table.add_row(r["run_id"], r["dag_id"], r["logical_date"], r["run_type"], r["state"], r["started_at"] or "-",
                      r["ended_at"] or "-")
    console().print(table)
    if older is not None:
        console().print(f"older runs: --before {older}", highlight=False)


@app.command()
def show(run: RunId, as_json: Json = False) -> None:
    """A run, the graph of the version it was created with, and its task instances (the as-was view)."""
    env = open_env()
    with env.read_connection() as conn:  # through the Core tables: no ORM for a read (decision 0317)
        row = run_document(conn, run)
    if as_json:
        print_json(row)
        return
    _render(row)


def _render(row: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    out.print(f"[bold]run {row['run_id']}[/bold] of {row['dag_id']}  {row['run_type']}  [bold]{row['state']}[/bold]")
    for key in ("logical_date", "data_interval_start", "data_interval_end", "previous_run_id", "dag_version",
                "overridden_by", "backfill_id", "created_at", "started_at", "ended_at"):
        if row.get(key) is not None:
            out.print(f"  {key:20} {row[key]}", highlight=False)
    if row.get("conf"):
        out.print(f"  {'conf':20} {json.dumps(row['conf'])}", highlight=False)
    dropped = row["code"].get("dropped")
    if dropped:
        out.print(f"  {'code':20} unknown: this version's code was dropped by a forced database downgrade "
                  f"({dropped['by']}, {dropped['at']}); what its tries ran is no longer known", highlight=False)
    elif not row["code"]["captured"]:
        out.print(f"  {'code':20} the DAG file only: this version was registered before ledger captured the "
                  "helper modules DAG files import, so its tries ran the stored DAG file with today's helpers",
                  highlight=False)
    table = Table("task", "upstream", "state", "try", "started", "ended", title="task instances (as-was graph)",
                  title_justify="left")
    instances: dict[str, list[dict[str, Any]]] = {}
    for ti in row["task_instances"]:
        instances.setdefault(ti["task_id"], []).append(ti)
    for t in row["graph"]["tasks"]:
        upstream = ", ".join(t["upstream"]) or "-"
        if t.get("mapped"):  # one line for the task and its count, then one per instance
            table.add_row(t["task_id"], upstream, f"{t['instances']} mapped", "", "", "")
        for ti in instances.get(t["task_id"], [{}]) if not t.get("mapped") else instances.get(t["task_id"], []):
            shown = ti.get("label", t["task_id"]) if t.get("mapped") else t["task_id"]
            table.add_row(shown, "" if t.get("mapped") else upstream, ti.get("state", "-"),
                          f"{ti.get('try_number', 0)}/{ti.get('max_tries', 0)}", ti.get("started_at") or "",
                          ti.get("ended_at") or "")
    out.print(table)
    all_tries = [(ti.get("label", ti["task_id"]), t) for ti in row["task_instances"] for t in ti["tries"]]
    if all_tries:
        tries = Table("task", "try", "state", "version", "host", "started", "ended", title="tries (the code each ran)",
                      title_justify="left")
        for task_id, t in all_tries:
            tries.add_row(task_id, str(t["try_number"]), t["state"], (t["dag_version"] or "not recorded")[:12],
                          t["hostname"] or "", t["started_at"] or "", t["ended_at"] or "")
        out.print(tries)
    if row["writes"]:
        writes = Table("dataset", "partition", "task", "try", "rows", "written", title="what this run wrote",
                       title_justify="left")
        for w in row["writes"]:
            writes.add_row(w["dataset"], w["partition"], w["task_id"], f"{w['try_number']} ({w['try_state']})",
                           "" if w["rows"] is None else str(w["rows"]), w["written_at"] or "")
        out.print(writes)
    if row["inlets_read"]:
        read = Table("task", "try", "inlet", "partition", "event", "written by", title="what its tries read (inlets)",
                     title_justify="left")
        for r in row["inlets_read"]:
            read.add_row(label(r["task_id"], r["map_index"]), str(r["try_number"]), r["inlet"], r["partition"] or "",
                         r["event_id"], f"{r['source_dag_id']} run {r['source_run_id']}")
        out.print(read)


def _operate(run: int, what: str, apply: Any, why: str | None) -> None:
    """Run one operator control on a run in one transaction; print what it did."""
    from ledger.store import runs as run_store

    env = open_env()
    with env.transaction() as session:
        r = run_store.get(session, run)
        done = apply(session, r, env.clock.now(), env.actor)
        run_id, dag_id = r.id, r.dag_id
    said = f"run {run_id} of {dag_id} {what}: {done.run_state_before} → {done.run_state}"
    if done.changed:
        said += f"; tasks set: {', '.join(sorted(done.changed))}"
    if done.stopping:
        said += f"; stopping the running tries of: {', '.join(sorted(done.stopping))}"
    if done.teardowns:
        said += f"; teardowns left to run: {', '.join(done.teardowns)}"
    if why:
        said += f"; reason: {why}"
    console().print(said, highlight=False, soft_wrap=True)


@app.command()
def cancel(run: RunId, reason: Reason = None) -> None:
    """Cancel a queued or running run: its running tries are stopped by the job running them, its tasks that
    have not started are skipped, and the run ends failed (or as its own rules say, when every task had already
    finished). Recorded as a `run_cancelled` event with who did it."""
    from ledger.services.operations import cancel_run

    why = reason_text(reason)
    _operate(run, "cancelled", lambda s, r, now, actor: cancel_run(s, r, now=now, actor=actor, reason=why), why)


@app.command("mark-success")
def mark_success(run: RunId, reason: Reason = None) -> None:
    """Mark a run success by hand: its unfinished task instances become success (refused while a try runs); its
    unfinished teardown tasks are left to run, and the run ends when they have."""
    from ledger.core.states import RunState
    from ledger.services.operations import mark_run

    why = reason_text(reason)
    _operate(run, "marked success",
             lambda s, r, now, actor: mark_run(s, r, RunState.SUCCESS, now=now, actor=actor, reason=why), why)


@app.command("mark-failed")
def mark_failed(run: RunId, reason: Reason = None) -> None:
    """Mark a run failed by hand: its unfinished task instances become failed (refused while a try runs); its
    unfinished teardown tasks are left to run, and the run ends when they have."""
    from ledger.core.states import RunState
    from ledger.services.operations import mark_run

    why = reason_text(reason)
    _operate(run, "marked failed",
             lambda s, r, now, actor: mark_run(s, r, RunState.FAILED, now=now, actor=actor, reason=why), why)
