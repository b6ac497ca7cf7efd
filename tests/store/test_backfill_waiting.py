"""Why a backfill's run waits, as its progress line says: here, a pool whose slots are all taken."""

from __future__ import annotations

from typing import Any

from ledger import DAG, BashTask
from ledger.core.states import BackfillState, RunState, RunType, TaskState
from ledger.models import Backfill
from ledger.services.sync import register_dag
from ledger.store import backfills
from ledger.store import dags as dag_store
from ledger.store import pools as pool_store
from ledger.store import runs as run_store
from tests.statements import statements_on
from tests.store.test_timeline_store import T0


def a_backfill_run(session: Any, clock: Any, *, pool_slots: int | None, limit: int | None = None,
                   theirs_of: str = "other") -> tuple[int, Any, Any]:
    """A backfill whose one run is running with its task `load` (pool `db`) scheduled, and a manual run of
    another DAG (`theirs_of`: or of the backfill's own DAG "bf", the next day) whose `load` is running and holds a
    slot of `db`. `limit`: bf's `load`'s max_active_tis_per_dag. Returns the backfill id and the two runs."""
    from datetime import timedelta

    for dag_id in ("bf", "other"):
        with DAG(dag_id, schedule="@daily", start_date=T0) as dag:
            BashTask("load", "true", pool="db", max_active_tis_per_dag=limit if dag_id == "bf" else None)
        dag.fileloc = f"/dags/{dag_id}.py"
        register_dag(session, dag, now=clock.now(), actor="test")
    if pool_slots is not None:
        pool_store.set_pool(session, "db", pool_slots, "")
    row = Backfill(dag_id="bf", range_start=T0, range_end=T0, reprocess="failed", state=BackfillState.RUNNING.value,
                   requested_by="test", created_at=clock.now())
    session.add(row)
    session.flush()
    spec = dag_store.current_spec(session, "bf")
    mine = run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0), RunType.BACKFILL,
                                                            backfill_id=row.id), now=clock.now(), actor="test")
    other_spec = dag_store.current_spec(session, theirs_of)
    when = T0 + timedelta(days=1) if theirs_of == "bf" else T0
    theirs = run_store.splice(session, other_spec, run_store.NewRun(other_spec.schedule.interval_for(when),
                                                                    RunType.MANUAL), now=clock.now(), actor="test")
    session.flush()
    mine.state = theirs.state = RunState.RUNNING.value
    for ti in run_store.task_instances(session, theirs.id):
        ti.state = TaskState.RUNNING.value
    session.flush()
    return row.id, mine, theirs


def more_runs(session: Any, clock: Any, backfill_id: int, *, days: int) -> None:
    """`days` more queued runs of the backfill, on the days after T0, of bf's current version."""
    from datetime import timedelta

    spec = dag_store.current_spec(session, "bf")
    for day in range(1, days + 1):
        run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0 + timedelta(days=day)),
                                                         RunType.BACKFILL, backfill_id=backfill_id),
                         now=clock.now(), actor="test")
    session.flush()


def test_a_running_backfill_run_whose_pool_is_full_says_which_pool_and_who_holds_it(session: Any,
                                                                                     clock: Any) -> None:
    backfill_id, mine, theirs = a_backfill_run(session, clock, pool_slots=1)
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == [
        (mine.id, f"pool db: all 1 slot(s) in use (first by run {theirs.id}, task load)", False)]


def test_a_pool_with_room_or_no_pool_row_is_no_reason_to_wait(session: Any, clock: Any) -> None:
    backfill_id, _mine, _theirs = a_backfill_run(session, clock, pool_slots=2)
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == []


def test_an_undefined_pool_does_not_limit(session: Any, clock: Any) -> None:
    backfill_id, _mine, _theirs = a_backfill_run(session, clock, pool_slots=None)
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == []


def test_a_pool_of_zero_slots_says_how_to_open_it(session: Any, clock: Any) -> None:
    backfill_id, mine, _theirs = a_backfill_run(session, clock, pool_slots=0)
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == [
        (mine.id, "pool db has 0 slots (ledger pools set db N)", False)]


def test_a_run_with_a_try_in_flight_is_moving_and_not_reported(session: Any, clock: Any) -> None:
    backfill_id, mine, _theirs = a_backfill_run(session, clock, pool_slots=1)
    for ti in run_store.task_instances(session, mine.id):
        ti.state = TaskState.QUEUED.value
    session.flush()
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == []


def test_the_statements_it_takes_do_not_grow_with_the_backfills_runs(session: Any, clock: Any) -> None:
    """A backfill of 1,000 dates asks why its runs wait while it stands still: per-run queries made that
    quadratic (8 task instances per second end to end); what is the same for a DAG is read once."""
    from datetime import timedelta

    with statements_on(session.connection()) as statements:
        backfill_id, _mine, _theirs = a_backfill_run(session, clock, pool_slots=1)
        spec = dag_store.current_spec(session, "bf")
        for day in range(1, 40):  # queued runs behind max_active_runs, and running ones with nothing in flight
            run = run_store.splice(session, spec, run_store.NewRun(spec.schedule.interval_for(T0 + timedelta(days=day)),
                                                                   RunType.BACKFILL, backfill_id=backfill_id),
                                   now=clock.now(), actor="test")
            run.state = RunState.RUNNING.value if day % 2 else RunState.QUEUED.value
        session.flush()
        setup = len(statements)
        found = backfills.waiting_reasons(session, backfill_id, job_id=1)
        assert len(found) == 40  # each run says why: its pool is full, or max_active_runs
        assert len(statements) - setup <= 12, statements[setup:]


def test_queued_runs_under_the_dags_limit_read_their_backfills_room_once(session: Any, clock: Any) -> None:
    """Runs queued behind the job's held runs (not behind max_active_runs) ask whether their backfill has room
    under a max_active_runs of its own: once per backfill, also when it has none (a backfill of 1,000 dates read
    it once per queued run, every half second it stood still: a fifth of its throughput)."""

    backfill_id, _mine, _theirs = a_backfill_run(session, clock, pool_slots=2)
    with DAG("bf", schedule="@daily", start_date=T0, max_active_runs=100) as dag:
        BashTask("load", "true", pool="db")
    dag.fileloc = "/dags/bf.py"
    register_dag(session, dag, now=clock.now(), actor="test")
    more_runs(session, clock, backfill_id, days=29)
    with statements_on(session.connection()) as statements:
        assert backfills.waiting_reasons(session, backfill_id, job_id=1) == []  # nothing holds them back
    rooms = [s for s in statements if "max_active_runs" in s and s.startswith("SELECT backfill.id")]
    assert len(rooms) == 1, rooms


def test_a_running_run_whose_task_is_at_its_max_active_tis_per_dag_says_so(session: Any, clock: Any) -> None:
    backfill_id, mine, theirs = a_backfill_run(session, clock, pool_slots=None, limit=1, theirs_of="bf")
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == [
        (mine.id, "task load's max_active_tis_per_dag 1 reached", False)]
    for ti in run_store.task_instances(session, theirs.id):
        ti.state = TaskState.SUCCESS.value
    session.flush()
    assert backfills.waiting_reasons(session, backfill_id, job_id=1) == []  # room again: nothing holds it


def test_without_a_depends_on_past_task_it_does_not_read_the_runs_previous_runs(session: Any, clock: Any) -> None:
    """The previous runs say why a depends_on_past task waits, and nothing else: a backfill whose DAG has none
    (the common case) does not read them each time it stands still."""

    backfill_id, _mine, _theirs = a_backfill_run(session, clock, pool_slots=1)
    more_runs(session, clock, backfill_id, days=3)
    with statements_on(session.connection()) as statements:
        backfills.waiting_reasons(session, backfill_id, job_id=1)
    by_id = [s for s in statements if s.startswith("SELECT dag_run.") and "WHERE dag_run.id IN" in s]
    assert by_id == []
