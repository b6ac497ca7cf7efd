"""`ledger datasets list|show`: the datasets DAGs write and are scheduled on, their events and partitions."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json
from ledger.cli.options import Json, within_range
from ledger.services.dataset_docs import dataset_document, datasets_document

app = typer.Typer(no_args_is_help=True, help="Datasets: which tasks write them, which DAGs run on them, their events.")
out = Console(highlight=False, soft_wrap=True)


def _partitions(p: dict[str, str] | None) -> str:
    return f"{p['every']} ({p['timezone']})" if p else "-"


@app.command("list")
def list_(as_json: Json = False) -> None:
    """Every dataset a task writes (outlets), a DAG is scheduled on, or that has events."""
    env = open_env()
    with env.reading() as session:
        docs = datasets_document(session)
    if as_json:
        print_json(docs)
        return
    table = Table("dataset", "partitions", "producers", "consumers", "events", "last event", title="datasets",
                  title_justify="left")
    for d in docs:
        table.add_row(d["dataset"], _partitions(d["partitions"]), ", ".join(d["producers"]) or "-",
                      ", ".join(d["consumers"]) or "-", str(d["events"]), (d["last_event_at"] or "-")[:19])
    out.print(table)


@app.command()
def show(
    dataset: Annotated[str, typer.Argument(help="The dataset (a Dataset's uri, an Asset's name).", show_default=False)],
    limit: Annotated[int, typer.Option(min=1, callback=within_range, help="Events shown, newest first.")] = 20,
    as_json: Json = False,
) -> None:
    """A dataset's producers and consumers, its latest events, and for a partitioned dataset the partition matrix:
    per partition and consumer DAG, whether the consumer's run read the current data, stale data, or none."""
    env = open_env()
    with env.reading() as session:
        doc = dataset_document(session, dataset, limit=limit)
    if as_json:
        print_json(doc)
        return
    out.print(f"dataset {doc['dataset']}  partitions: {_partitions(doc['partitions'])}")
    out.print(f"producers: {', '.join(doc['producers']) or '-'}")
    out.print(f"consumers: {', '.join(doc['consumers']) or '-'}")
    if doc["matrix"]:
        matrix = Table("partition", "newest event", *doc["consumers"], title="partitions", title_justify="left")
        for row in doc["matrix"]:
            matrix.add_row(row["partition"], row["event_id"], *(row["consumers"][c] for c in doc["consumers"]))
        out.print(matrix)
    events = Table("event", "partition", "written by", "at", "extra", title="latest events", title_justify="left")
    for e in doc["events"]:
        w = e["written_by"]
        events.add_row(e["event_id"], e["partition"] or "-",
                       f"{w['dag_id']}.{w['task_id']} run {w['run_id']}"
                       + (f" (backfill {w['backfill_id']})" if w["backfill_id"] else ""),
                       (e["at"] or "")[:19], str(e["extra"]) if e.get("extra") else "")
    out.print(events)
