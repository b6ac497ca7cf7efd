"""`ledger lineage DATASET`: which run produced the current data of each partition, and its rewrites."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json
from ledger.cli.options import Json, usage_error
from ledger.services.dataset_docs import stale_document
from ledger.services.documents import lineage_document

out = Console(highlight=False, soft_wrap=True)


def lineage(
    dataset: Annotated[str | None, typer.Argument(help="The dataset name, as tasks record it.",
                                                  show_default=False)] = None,
    partition: Annotated[str | None, typer.Option(help="Only this partition.")] = None,
    stale: Annotated[bool, typer.Option("--stale", help="List the consumer runs that read a partition since "
                                        "rewritten, each with the write that made it stale.")] = False,
    as_json: Json = False,
) -> None:
    """Which run (task, try, DAG version) produced each partition of a dataset, and what it replaced.

    Lists the current write of every partition first, then the earlier writes, overridden runs included: the writes
    tasks recorded, and the dataset events of their outlets (`-`: an unpartitioned dataset's).
    With --stale: the stale consumer runs instead (of every DAG, or of the DAGs scheduled on DATASET)."""
    env = open_env()
    if stale:
        _stale(env, dataset, as_json)
        return
    if dataset is None:
        raise usage_error("give a DATASET, or --stale")
    with env.reading() as session:
        result = lineage_document(session, dataset, partition)
    if as_json:
        print_json(result)
        return
    table = Table("partition", "current data from", "version", "rows", "written", "earlier writes",
                  title=f"lineage of {dataset}", title_justify="left")
    for p in result:
        cur = p["current"]
        earlier = [w for w in p["history"] if w is not cur]
        table.add_row(
            p["partition"] or "-",
            f"run {cur['run_id']} ({cur['run_type']}) {cur['task_id']} try {cur['try_number']}"
            + (f", event {cur['event_id']}" if cur["event_id"] else "") if cur else "-",
            cur["dag_version"][:8] if cur else "-", str(cur["rows"]) if cur and cur["rows"] is not None else "",
            cur["written_at"][:19] if cur else "",
            "; ".join(f"run {w['run_id']} v {w['dag_version'][:8]}"
                      + (f", {w['rows']} rows" if w["rows"] is not None else "")
                      + (f", try {w['try_number']} {w['try_state']}" if w["try_state"] != "success" else "")
                      + (f", try {w['try_number']}, event {w['event_id']}" if w["event_id"] else "")
                      + f" ({w['run_state']}"
                      + (f" by {w['overridden_by']}" if w["overridden_by"] else "") + ")" for w in earlier) or "-")
    out.print(table)


def _stale(env: Any, dataset: str | None, as_json: bool) -> None:
    with env.reading() as session:
        found = stale_document(session)
    if dataset is not None:
        found = [s for s in found if s["dataset"] == dataset]
    if as_json:
        print_json(found)
        return
    table = Table("DAG", "logical date", "run", "read", "stale because", title="stale consumer runs",
                  title_justify="left")
    for s in found:
        r, b = s["read"], s["stale_because"]
        by = b["written_by"]
        table.add_row(s["dag_id"], s["logical_date"], s["run_id"],
                      f"{s['dataset']} {s['partition']} (event {r['event_id']}, run {r['written_by']['run_id']})",
                      f"event {b['event_id']}: run {by['run_id']} of {by['dag_id']}"
                      + (f" (backfill {by['backfill_id']})" if by["backfill_id"] else ""))
    out.print(table)
    out.print(f"{len(found)} stale run(s)")
