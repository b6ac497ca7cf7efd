"""The scheduler's pure planner, driven directly: capacity limits, maximal use of free slots, priority order,
max_active_runs, cancelled backfills. No database, no clock, no processes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pendulum
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import DAG, BashTask
from ledger.core.dependencies import PreviousRun
from ledger.core.states import RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.scheduler.loop.planner import HeldRun, choose, plan_runs
from ledger.sdk.describe import read_spec, version_of
from ledger.store.tasks import TiRow
from tests.conftest import examples

NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")
DAY0 = pendulum.datetime(2024, 3, 1, tz="UTC")


@dataclass
class Run:
    id: int
    dag_id: str
    logical_date: datetime
    state: str = RunState.RUNNING.value
    previous_run_id: int | None = None
    backfill_id: int | None = None


@dataclass
class Limits:
    max_active_tasks: int


# -- choose ------------------------------------------------------------------------------------------------

candidate_rows = st.lists(st.tuples(st.integers(1, 3),  # priority weight
                                    st.sampled_from(["d0", "d1", "d2"]),
                                    st.sampled_from(["default_pool", "p1", "p2"]),
                                    st.integers(0, 5),  # logical day
                                    st.sampled_from([1, 1, 2, 3])),  # the pool's slots it takes
                          max_size=14)


def make_candidates(rows: list[tuple[int, str, str, int, int]], caps: dict[str, int]) -> list[Any]:
    out = []
    for i, (priority, dag_id, pool, day, pool_slots) in enumerate(rows):
        ti = TiRow(i + 1, 100 + i, f"t{i}", TaskState.SCHEDULED, 0, 1, None, priority, pool, None,
                   pool_slots=pool_slots)
        out.append((ti, Run(100 + i, dag_id, DAY0 + timedelta(days=day)), Limits(caps[dag_id])))
    return out


@settings(max_examples=examples(300), deadline=None)
@given(rows=candidate_rows, slots=st.integers(0, 6),
       caps=st.fixed_dictionaries({d: st.integers(1, 4) for d in ("d0", "d1", "d2")}),
       active=st.fixed_dictionaries({d: st.integers(0, 4) for d in ("d0", "d1", "d2")}),
       room=st.fixed_dictionaries({"p1": st.integers(0, 3), "p2": st.integers(0, 3)}),
       newest_first=st.booleans())
def test_choose_fills_free_slots_within_every_limit_in_priority_order(
        rows: list[tuple[int, str, str, int, int]], slots: int, caps: dict[str, int], active: dict[str, int],
        room: dict[str, int], newest_first: bool) -> None:
    candidates = make_candidates(rows, caps)
    chosen = choose(candidates, slots=slots, active=active, pool_room=room, newest_first=newest_first)
    chosen_ids = {c[0].id for c in chosen}
    per_dag = {d: sum(1 for c in chosen if c[1].dag_id == d) for d in caps}
    per_pool = {p: sum(c[0].pool_slots for c in chosen if c[0].pool == p) for p in room}  # the slots they take
    # within every limit
    assert len(chosen) <= slots
    for d in caps:
        assert per_dag[d] == 0 or active[d] + per_dag[d] <= caps[d]
    for p in room:
        assert per_pool[p] <= room[p]
    assert len(chosen_ids) == len(chosen)

    def blocked(c: Any) -> bool:  # what keeps an unchosen candidate out, at the end
        return (len(chosen) >= slots or active[c[1].dag_id] + per_dag[c[1].dag_id] >= caps[c[1].dag_id]
                or (c[0].pool in room and per_pool[c[0].pool] + c[0].pool_slots > room[c[0].pool]))

    # maximal: nothing left out that would still fit
    assert all(blocked(c) for c in candidates if c[0].id not in chosen_ids)
    # in order: a left-out candidate that ranks before a chosen one was kept out by its DAG or its pool
    sign = -1 if newest_first else 1

    def rank(c: Any) -> tuple[int, float, int]:
        return -c[0].priority_weight, sign * c[1].logical_date.timestamp(), c[0].id

    worst_chosen = max((rank(c) for c in chosen), default=None)
    for c in candidates:
        if c[0].id in chosen_ids or worst_chosen is None or rank(c) > worst_chosen:
            continue
        d, p = c[1].dag_id, c[0].pool
        assert active[d] + per_dag[d] >= caps[d] or (p in room and per_pool[p] + c[0].pool_slots > room[p])


@settings(max_examples=examples(200), deadline=None)
@given(rows=candidate_rows, slots=st.integers(0, 6), newest_first=st.booleans())
def test_choose_picks_the_same_with_the_runs_dates_and_dags_given_as_without(
        rows: list[tuple[int, str, str, int, int]], slots: int, newest_first: bool) -> None:
    candidates = make_candidates(rows, {"d0": 2, "d1": 1, "d2": 3})
    dates = {c[1].id: c[1].logical_date.timestamp() for c in candidates}
    dag_of = {c[1].id: c[1].dag_id for c in candidates}
    limits: dict[str, Any] = dict(slots=slots, active={"d1": 1}, pool_room={"p1": 1}, newest_first=newest_first)
    assert choose(candidates, dates=dates, dag_of=dag_of, **limits) == choose(candidates, **limits)


limited_rows = st.lists(st.tuples(st.sampled_from(["d0", "d1"]), st.sampled_from(["a", "b"]),
                                  st.integers(0, 2)),  # run (of its DAG)
                        max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(rows=limited_rows, slots=st.integers(0, 8),
       task_room=st.dictionaries(st.tuples(st.sampled_from(["d0", "d1"]), st.sampled_from(["a", "b"])),
                                 st.integers(-1, 3)),
       run_task_room=st.dictionaries(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b"])), st.integers(-1, 3)))
def test_choose_keeps_each_task_within_its_room_over_the_dag_and_in_each_run(
        rows: list[tuple[str, str, int]], slots: int, task_room: dict[tuple[str, str], int],
        run_task_room: dict[tuple[int, str], int]) -> None:
    candidates = []
    for i, (dag_id, task_id, run) in enumerate(rows):
        run_id = run + (3 if dag_id == "d1" else 0)
        ti = TiRow(i + 1, run_id, task_id, TaskState.SCHEDULED, 0, 1, None, 1, "default_pool", None, map_index=i)
        candidates.append((ti, Run(run_id, dag_id, DAY0 + timedelta(days=run)), Limits(100)))
    chosen = choose(candidates, slots=slots, active={}, pool_room={}, task_room=task_room,
                    run_task_room=run_task_room)
    per_task = {k: sum(1 for c in chosen if (c[1].dag_id, c[0].task_id) == k) for k in task_room}
    per_run = {k: sum(1 for c in chosen if (c[0].run_id, c[0].task_id) == k) for k in run_task_room}
    assert len(chosen) <= slots
    assert all(per_task[k] == 0 or per_task[k] <= room for k, room in task_room.items())
    assert all(per_run[k] == 0 or per_run[k] <= room for k, room in run_task_room.items())
    chosen_ids = {c[0].id for c in chosen}
    for ti, run, _limits in candidates:  # maximal: each one left out has no room under some limit, or no slot
        if ti.id not in chosen_ids:
            dag_key, run_key = (run.dag_id, ti.task_id), (ti.run_id, ti.task_id)
            assert len(chosen) >= slots or (dag_key in task_room and per_task[dag_key] >= task_room[dag_key]) \
                or (run_key in run_task_room and per_run[run_key] >= run_task_room[run_key])


def test_a_candidate_whose_version_has_no_limit_is_not_held_back_but_takes_from_the_tasks_room() -> None:
    """Two versions of one task side by side: the run pinned to the limited one waits; the other's instance runs,
    and counts against the limit like any instance queued or running."""
    old_version = TiRow(1, 101, "load", TaskState.SCHEDULED, 0, 1, None, 1, "default_pool", None)
    limited = TiRow(2, 102, "load", TaskState.SCHEDULED, 0, 1, None, 1, "default_pool", None)
    candidates: list[Any] = [(old_version, Run(101, "d0", DAY0), Limits(16)),
                             (limited, Run(102, "d0", DAY0 + timedelta(days=1)), Limits(16))]
    no_room = choose(candidates, slots=4, active={}, pool_room={}, task_room={("d0", "load"): 0}, limited={2})
    assert [c[0].id for c in no_room] == [1]
    one_left = choose(candidates, slots=4, active={}, pool_room={}, task_room={("d0", "load"): 1}, limited={2})
    assert [c[0].id for c in one_left] == [1]  # the unlimited one, first by date, took the last room


def test_an_instance_that_needs_more_pool_slots_than_are_free_waits_and_one_after_it_that_fits_goes() -> None:
    """Airflow's pool_slots: a pool with 3 free slots has room for a 2-slot instance; the next 2-slot one waits (1
    free), and a 1-slot one ranked after it takes that slot. One that needs more than are free never goes."""
    rows = [(3, "d0", "p1", 0, 2), (2, "d0", "p1", 0, 2), (1, "d0", "p1", 0, 1), (1, "d0", "p2", 1, 4)]
    candidates = make_candidates(rows, {"d0": 10, "d1": 10, "d2": 10})
    chosen = choose(candidates, slots=10, active={}, pool_room={"p1": 3, "p2": 3})
    assert [c[0].id for c in chosen] == [1, 3]
    assert choose(candidates[1:], slots=10, active={}, pool_room={"p1": 1, "p2": 3}) == [candidates[2]]


def test_choose_gives_nothing_without_a_slot() -> None:
    candidates = make_candidates([(1, "d0", "default_pool", 0, 1)], {"d0": 4, "d1": 4, "d2": 4})
    assert choose(candidates, slots=0, active={}, pool_room={}) == []


# -- plan_runs ----------------------------------------------------------------------------------------------


def spec(max_active_runs: int) -> DagSpec:
    with DAG("d", schedule="@daily", start_date=DAY0, max_active_runs=max_active_runs) as dag:
        a = BashTask("a", "true", retries=1)
        a >> BashTask("b", "true")
    version, text = version_of(dag)
    return read_spec(version, text)


TI_STATES = [TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCESS, TaskState.FAILED,
             TaskState.UP_FOR_RETRY, TaskState.SKIPPED, TaskState.UPSTREAM_FAILED]

held_runs = st.lists(st.tuples(st.sampled_from([RunState.QUEUED.value, RunState.RUNNING.value]),
                               st.sampled_from(TI_STATES), st.sampled_from(TI_STATES),
                               st.booleans(),  # its backfill was cancelled
                               st.booleans()),  # a's retry is due (else in an hour)
                     max_size=8)


@settings(max_examples=examples(300), deadline=None)
@given(rows=held_runs, max_active_runs=st.integers(1, 4), running_elsewhere=st.integers(0, 4),
       newest_first=st.booleans())
def test_plan_runs_starts_within_max_active_runs_and_readies_only_runnable_tasks(
        rows: list[tuple[str, TaskState, TaskState, bool, bool]], max_active_runs: int, running_elsewhere: int,
        newest_first: bool) -> None:
    the_spec = spec(max_active_runs)
    held = []
    for i, (run_state, a_state, b_state, cancelled, due) in enumerate(rows):
        run = Run(i + 1, "d", DAY0 + timedelta(days=i), run_state, backfill_id=7 if cancelled else None)
        retry_at = NOW - timedelta(seconds=1) if due else NOW + timedelta(hours=1)
        tis = {"a": TiRow(10 * i + 1, run.id, "a", a_state, 1, 2,
                          retry_at if a_state == TaskState.UP_FOR_RETRY else None, 1, "default_pool", None),
               "b": TiRow(10 * i + 2, run.id, "b", b_state, 0, 1, None, 1, "default_pool", None)}
        held.append(HeldRun(run, the_spec, tis, None, backfill_cancelled=cancelled))
    running = {"d": running_elsewhere + sum(1 for h in held if h.run.state == RunState.RUNNING.value)}
    plan = plan_runs(held, running, now=NOW, newest_first=newest_first)

    started = {r.id for r in plan.start}
    assert len(started) <= max(0, max_active_runs - running["d"])
    assert all(r.state == RunState.QUEUED.value for r in plan.start)
    by_id = {h.run.id: h for h in held}
    for ti, run, _spec in plan.ready:
        h = by_id[run.id]
        assert not h.backfill_cancelled
        assert run.state == RunState.RUNNING.value or run.id in started  # a queued run waits for its turn
        assert ti.state in (TaskState.SCHEDULED, TaskState.UP_FOR_RETRY)
        if ti.state == TaskState.UP_FOR_RETRY:
            assert ti.next_try_at is None or ti.next_try_at <= NOW  # no due time: at once
        if ti.task_id == "b" and ti.state == TaskState.SCHEDULED:  # its trigger rule: all_success
            assert h.tis["a"].state == TaskState.SUCCESS
    finished = {r.id: state for r, state, _ in plan.finish}
    for h in held:
        active = any(t.state in (TaskState.QUEUED, TaskState.RUNNING) for t in h.tis.values())
        if h.backfill_cancelled:
            assert h.run.id not in started
            assert (h.run.id in finished) == (not active)
        if h.run.id in finished:
            assert not active and h.run.id not in {run.id for _ti, run, _s in plan.ready}
    if plan.retry_at is not None:
        assert plan.retry_at > NOW


def test_a_run_finishes_failed_when_its_backfill_was_cancelled_and_nothing_runs() -> None:
    run = Run(1, "d", DAY0, backfill_id=3)
    tis = {"a": TiRow(1, 1, "a", TaskState.SUCCESS, 1, 1, None, 1, "default_pool", None),
           "b": TiRow(2, 1, "b", TaskState.SCHEDULED, 0, 1, None, 1, "default_pool", None)}
    plan = plan_runs([HeldRun(run, spec(1), tis, PreviousRun({}), backfill_cancelled=True)], {}, now=NOW)
    assert plan.finish == [(run, RunState.FAILED, "backfill 3 cancelled; skipped b (run cancelled)")]
    assert plan.mark == [(tis["b"], TaskState.SKIPPED, run)] and plan.ready == [] and plan.start == []


def test_a_cancelled_backfills_run_whose_tasks_all_finished_ends_by_its_rules_without_starting() -> None:
    run = Run(1, "d", DAY0, state=RunState.QUEUED.value, backfill_id=3)
    tis = {"a": TiRow(1, 1, "a", TaskState.SUCCESS, 1, 1, None, 1, "default_pool", None),
           "b": TiRow(2, 1, "b", TaskState.SUCCESS, 1, 1, None, 1, "default_pool", None)}
    plan = plan_runs([HeldRun(run, spec(1), tis, PreviousRun({}), backfill_cancelled=True)], {}, now=NOW)
    assert plan.finish == [(run, RunState.SUCCESS, "backfill 3 cancelled")] and plan.start == []


@dataclass
class TimedRun(Run):
    data_interval_end: datetime = DAY0
    started_at: datetime | None = None
    deadline_missed_at: datetime | None = None


def timed_spec(**limits: timedelta) -> DagSpec:
    with DAG("d", schedule="@daily", start_date=DAY0, **limits) as dag:  # type: ignore[arg-type]
        BashTask("a", "true")
    version, text = version_of(dag)
    return read_spec(version, text)


@settings(max_examples=examples(200), deadline=None)
@given(started_minutes_ago=st.integers(0, 120), timeout_minutes=st.integers(1, 120),
       interval_end_minutes_ago=st.integers(-120, 120), deadline_minutes=st.integers(1, 120),
       already_missed=st.booleans())
def test_a_run_times_out_and_misses_its_deadline_exactly_when_their_times_pass(
        started_minutes_ago: int, timeout_minutes: int, interval_end_minutes_ago: int, deadline_minutes: int,
        already_missed: bool) -> None:
    run = TimedRun(1, "d", DAY0, RunState.RUNNING.value,
                   data_interval_end=NOW - timedelta(minutes=interval_end_minutes_ago),
                   started_at=NOW - timedelta(minutes=started_minutes_ago),
                   deadline_missed_at=NOW - timedelta(minutes=1) if already_missed else None)
    the_spec = timed_spec(dagrun_timeout=timedelta(minutes=timeout_minutes),
                          deadline=timedelta(minutes=deadline_minutes))
    tis = {"a": TiRow(1, 1, "a", TaskState.RUNNING, 1, 1, None, 1, "default_pool", None)}
    plan = plan_runs([HeldRun(run, the_spec, tis)], {"d": 1}, now=NOW)
    timed_out = started_minutes_ago >= timeout_minutes
    missed = not already_missed and interval_end_minutes_ago >= deadline_minutes
    assert plan.timed_out == ([run] if timed_out else [])
    assert plan.deadline_missed == ([run] if missed else [])
    coming = [t for t in (
        None if timed_out else run.started_at + timedelta(minutes=timeout_minutes),  # type: ignore[operator]
        None if already_missed or missed else run.data_interval_end + timedelta(minutes=deadline_minutes),
    ) if t is not None]
    assert plan.retry_at == (min(coming) if coming else None)  # the loop wakes when the next one comes due
    assert (1 in plan.settled) == (not coming and not timed_out)


@settings(max_examples=examples(100), deadline=None)
@given(queued=st.lists(st.sampled_from([None, 1, 2]), max_size=8), room_1=st.integers(-1, 3),
       room_2=st.integers(0, 3), max_active_runs=st.integers(1, 8))
def test_queued_runs_of_a_backfill_start_only_within_its_own_max_active_runs(
        queued: list[int | None], room_1: int, room_2: int, max_active_runs: int) -> None:
    """Backfill 1 and 2 have their own max_active_runs (room: how many more of their runs may run); runs of no
    backfill are limited only by their DAG."""
    the_spec = spec(max_active_runs)
    held = [HeldRun(Run(i + 1, "d", DAY0 + timedelta(days=i), RunState.QUEUED.value, backfill_id=b), the_spec,
                    {"a": TiRow(10 * i + 1, i + 1, "a", TaskState.SCHEDULED, 0, 1, None, 1, "default_pool", None)})
            for i, b in enumerate(queued)]
    plan = plan_runs(held, {}, now=NOW, backfill_room={1: room_1, 2: room_2})
    started = [r.backfill_id for r in plan.start]
    room = {1: max(room_1, 0), 2: room_2}
    assert started.count(1) <= room[1] and started.count(2) <= room[2] and len(started) <= max_active_runs
    for h in held:  # a run left queued was kept by a limit that is full
        if h.run not in plan.start:
            assert len(started) == max_active_runs or started.count(h.run.backfill_id) == room[h.run.backfill_id]
