"""`ledger events`: the append-only audit log."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, print_json, refuse_unknown_filters
from ledger.cli.options import Json, id_parser, within_range
from ledger.store import callbacks as callback_store
from ledger.store import events as event_store

out = Console()

# every kind of event ledger records (and the task state signals `ledger events` lists among them), for
# `--kind`: a kind that is not here is a usage error that names these (it would list nothing, silently).
# tests/cli/test_exit_statuses.py checks that the code records no kind missing here.
EVENT_KINDS = frozenset({
    "backfill_adopted", "backfill_cancelled", "backfill_created", "backfill_finished", "backfill_interrupted",
    "backfill_resumed", *(f"callback_{outcome}" for outcome in callback_store.OUTCOMES), "connection_deleted",
    "connection_set", "dag_paused", "dag_unpaused", "deadline_missed", "job_died", "lock_stolen", "lock_taken",
    "locks_released", "pool_deleted", "pool_set", "run_cancelled", "run_created", "run_marked", "run_overridden",
    "run_restored", "run_spliced", "run_state_changed", "run_version_changed", "signal_action", "signal_rule_failed",
    "signal_sent", "task_expanded", "task_failed", "task_skipped", "sensor_checked", event_store.TASK_STATE_KIND,
    "tasks_cleared", "tasks_marked", "try_adopted", "try_lost", "try_not_started", "try_redelivery_refused",
    "variable_deleted", "variable_set", "version_registered", "version_reverted", "code_dropped",
    "fernet_key_rotated", "dataset_triggered", "dataset_rerun", "dataset_rerun_refused", "user_created",
    "user_deleted", "user_role_set", "api_token_created", "api_token_revoked", "inlets_read", "try_resent",
    "audit_started", "audit_stopped",
})


def _check_kinds(kinds: list[str] | None) -> None:
    """Refuse a --kind that names no kind of event, naming the kinds."""
    unknown = sorted(set(kinds or ()) - EVENT_KINDS)
    if unknown:
        raise typer.BadParameter(f"no event kind {', '.join(map(repr, unknown))}; the kinds are: "
                                 f"{', '.join(sorted(EVENT_KINDS))}", param_hint="'--kind'")


def events(
    dag: Annotated[str | None, typer.Option("--dag", help="Only events of this DAG.")] = None,
    run: Annotated[int | None, typer.Option("--run", help="Only events of this run.", parser=id_parser("run id"),
                                          show_default=False)] = None,
    task: Annotated[str | None, typer.Option(
        "--task", help="Only events about this task (its tries, marks, clears, signals).")] = None,
    kind: Annotated[list[str] | None, typer.Option("--kind", help="Only events of this kind (repeatable).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, callback=within_range, help="Only the newest N events.")] = None,
    before: Annotated[int | None, typer.Option(
        "--before", parser=id_parser("event id"), show_default=False,
        help="Only events older than this event id (the next page of --limit: the oldest id it listed).")] = None,
    before_signal: Annotated[int | None, typer.Option(
        "--before-signal", parser=id_parser("signal id"), show_default=False,
        help="Only task state signals older than this signal id (the next page of --limit: the oldest signal_id "
             "it listed).")] = None,
    task_signals: Annotated[bool, typer.Option(
        "--task-signals/--no-task-signals",
        help="List task state signals (kind task_state_signal) among the events.")] = True,
    as_json: Json = False,
) -> None:
    """Every recorded change: runs created, spliced, overridden, state changes, locks, versions, signals.

    Signals sent with `ledger signal send` or by tasks are `signal_sent` events, the actions the scheduler
    took on them `signal_action`. Task state changes are listed as `task_state_signal` rows, read from the
    signal table: they have no event id (their signal id is in the details)."""
    _check_kinds(kind)
    env = open_env()
    with env.reading() as session:
        refuse_unknown_filters(session, dag, run)
        rows = event_store.listing_json(session, dag_id=dag, run_id=run, kinds=kind, limit=limit,
                                        task_signals=task_signals, task_id=task, before=before,
                                        before_signal=before_signal)
    if as_json:
        print_json(rows)
        return
    table = Table("id", "at", "kind", "actor", "dag", "run", "details")
    for e in rows:
        table.add_row("" if e["id"] is None else str(e["id"]), e["at"], e["kind"], e["actor"], e["dag_id"] or "",
                      e["run_id"] or "", json.dumps(e["details"], ensure_ascii=False))
    out.print(table)
