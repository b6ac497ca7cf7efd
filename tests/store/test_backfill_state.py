"""A backfill's state agrees with its counts (decision 0270): a run of a finished backfill that ends again (marked,
or cleared and re-run) gives the backfill the state its live runs say, recorded as an event; while such a run is
unfinished the backfill shows `running`."""

from __future__ import annotations

from typing import Any

from ledger import DAG, BashTask
from ledger.core.backfill_state import agreed_state
from ledger.core.states import RunState
from ledger.services import documents, operations
from ledger.services.sync import register_dag
from ledger.store import backfills
from ledger.store import events as event_store
from ledger.store import runs as run_store
from tests.store.test_backfill_adoption import backfill_with_runs
from tests.store.test_timeline_store import T0


def test_the_agreed_state_follows_the_counts_of_a_finished_backfill_only() -> None:
    assert agreed_state("failed", unfinished=0, failed=0) == "success"
    assert agreed_state("success", unfinished=0, failed=1) == "failed"
    assert agreed_state("success", unfinished=1, failed=0) == "running"
    assert agreed_state("cancelled", unfinished=0, failed=0) == "cancelled"
    assert agreed_state("interrupted", unfinished=2, failed=0) == "interrupted"


def test_a_failed_backfill_whose_failed_run_is_marked_success_becomes_success(session: Any, clock: Any) -> None:
    with DAG("bf", schedule="@daily", start_date=T0) as dag:
        BashTask("a", "true")
    dag.fileloc = "/dags/bf.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    backfill_id, (good, bad) = backfill_with_runs(session, clock, [0, 1])
    for run_id, state in ((good, RunState.SUCCESS), (bad, RunState.FAILED)):
        run_store.get(session, run_id).state = state.value
    session.flush()
    assert backfills.finish_backfill(session, backfill_id, now=clock.now(), actor="test") == "failed"

    operations.mark_run(session, run_store.get(session, bad), RunState.SUCCESS, now=clock.now(), actor="op")
    doc = documents.backfill_document(session, backfill_id)
    assert (doc["state"], doc["runs_failed"]) == ("success", 0)
    assert backfills.get(session, backfill_id).state == "success"
    last = event_store.listing_json(session, kinds=["backfill_finished"], limit=1)[0]
    assert (last["details"]["state"], last["details"]["state_before"]) == ("success", "failed")

    run_store.get(session, bad).state = RunState.QUEUED.value  # cleared: waits to run again
    session.flush()
    assert documents.backfill_document(session, backfill_id)["state"] == "running"
