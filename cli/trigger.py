"""`ledger trigger DAG`: a manual run spliced into the timeline."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from ledger.cli.env import open_env, parse_conf
from ledger.cli.options import DagId, DagsFolder, checked_date
from ledger.core.dates import iso
from ledger.services.operations import trigger_dag

out = Console()


def trigger(
    dag_id: DagId,
    logical_date: Annotated[str | None, typer.Option("--logical-date", help="ISO date or datetime; a bare date "
                            "or naive time is read in the DAG's timezone (default: now).",
                            callback=checked_date)] = None,
    conf: Annotated[str | None, typer.Option(help="A JSON object given to the run.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Override the live run at that date, if any.")] = False,
    dags_folder: DagsFolder = None,
) -> None:
    """Create a manual run (queued) and splice it into the DAG's timeline."""
    conf_value = parse_conf(conf)
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        run, existing = trigger_dag(session, dag_id, logical_date, conf_value, replace=replace,
                                    now=env.clock.now(), actor=env.actor)
    line = (f"created manual run {run.id} of {dag_id} at {iso(run.logical_date)} "
            f"(interval {iso(run.data_interval_start)} to {iso(run.data_interval_end)}), "
            f"previous {run.previous_run_id or 'none'}, version {run.version_hash[:12]}"
            + (f"; run {existing.id} is now overridden" if existing is not None else ""))
    out.print(line, highlight=False, soft_wrap=True)
