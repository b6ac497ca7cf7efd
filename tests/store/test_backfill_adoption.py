"""The runs a backfill finishes when its plan adopts the unfinished runs of a dead one: its own and exactly the
adopted ones. Its progress counts them all; it claims no other run of the dead backfill (those are left to
`backfill resume`, the same command over their dates, or a scheduler)."""

from __future__ import annotations

from typing import Any

from ledger import DAG, BashTask
from ledger.core.states import BackfillState, RunState, RunType, TaskState
from ledger.models import Backfill
from ledger.services.sync import register_dag
from ledger.store import backfills
from ledger.store import dags as dag_store
from ledger.store import jobs as job_store
from ledger.store import runs as run_store
from tests.store.test_timeline_store import T0


def backfill_with_runs(session: Any, clock: Any, days: list[int]) -> tuple[int, list[int]]:
    """A running backfill of DAG `bf` with one queued run, held by no job, at each of `days` (0 is T0)."""
    row = Backfill(dag_id="bf", range_start=T0, range_end=T0, reprocess="none", state=BackfillState.RUNNING.value,
                   requested_by="test", created_at=clock.now())
    session.add(row)
    session.flush()
    spec = dag_store.current_spec(session, "bf")
    runs = [run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=day)),
                                                              RunType.BACKFILL, backfill_id=row.id),
                             now=clock.now(), actor="test") for day in days]
    session.flush()
    return row.id, [r.id for r in runs]


def test_a_backfill_counts_and_claims_its_own_runs_and_the_adopted_ones_only(session: Any, clock: Any) -> None:
    with DAG("bf", schedule="@daily", start_date=T0) as dag:
        BashTask("a", "true")
    dag.fileloc = "/dags/bf.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    dead, (first, second, beyond) = backfill_with_runs(session, clock, [0, 1, 2])  # 2: outside the new range
    mine, (own,) = backfill_with_runs(session, clock, [3])
    adopted = [first, second]

    p = backfills.progress_of(session, mine, adopted)
    assert (p.runs_total, p.runs_done, p.runs_failed, p.tasks) == (3, 0, 0, {TaskState.SCHEDULED.value: 3})
    assert backfills.progress_of(session, mine).runs_total == 1  # without the adopted runs: its own

    job = job_store.start_job(session, "BackfillJob", now=clock.now())
    claimed = job_store.claim_runs(session, job.id, now=clock.now(), stale_after=60, limit=10, actor="test",
                                   backfill_id=mine, also_run_ids=adopted)
    assert sorted(run for run, _holder in claimed) == sorted([first, second, own])  # not `beyond`

    for run_id, state in ((first, RunState.SUCCESS), (second, RunState.FAILED), (own, RunState.SUCCESS)):
        run_store.get(session, run_id).state = state.value
    session.flush()
    p = backfills.progress_of(session, mine, adopted)
    assert (p.runs_total, p.runs_done, p.runs_failed) == (3, 3, 1)
    # the backfill's state says what became of every run it finished; the dead one still has `beyond` to run
    assert backfills.finish_backfill(session, mine, now=clock.now(), actor="test", adopted=adopted) == "failed"
    assert backfills.finish_backfill(session, dead, now=clock.now(), actor="test") == "running"
    assert run_store.get(session, beyond).lock_holder is None
