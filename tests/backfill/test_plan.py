"""Pure planning of a backfill: per date new / override / skip with its reason, the order, and refusals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pendulum
import pytest

from ledger import DAG, BashTask
from ledger.core.backfill_plan import (
    Action,
    LiveRun,
    PastRun,
    Reprocess,
    backfill_intervals,
    blocking_run,
    decide_date,
    plan_backfill,
)
from ledger.core.dates import parse_user_date
from ledger.core.errors import InvalidInput
from ledger.core.versions import DagSpec
from ledger.sdk.describe import read_spec, version_of

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")
NOW = pendulum.datetime(2024, 3, 10, 12, tz="UTC")


def a_spec(*, depends_on_past: bool = False, **kw: Any) -> DagSpec:
    with DAG("d", schedule=kw.pop("schedule", "@daily"), start_date=kw.pop("start_date", T0), catchup=True,
             **kw) as dag:
        a = BashTask("a", "true")
        b = BashTask("b", "true", depends_on_past=depends_on_past)
        a >> b
    return read_spec(*version_of(dag))


def live(state: str, run_id: int = 7, *, run_type: str = "scheduled", holder: int | None = None,
         alive: bool = False) -> LiveRun:
    return LiveRun(run_id, state, run_type, holder, alive)


def days(*ds: int) -> list[pendulum.DateTime]:
    return [T0.add(days=d - 1) for d in ds]


# -- decide_date ---------------------------------------------------------------------------------------

def test_a_date_without_a_live_run_is_new_whatever_the_policy() -> None:
    for policy in Reprocess:
        assert decide_date(None, policy) == (Action.NEW, "no live run at this date")


@pytest.mark.parametrize(("state", "policy", "action", "reason"), [
    ("success", Reprocess.NONE, Action.SKIP, "succeeded; reprocess=none"),
    ("failed", Reprocess.NONE, Action.SKIP, "failed; reprocess=none"),
    ("success", Reprocess.FAILED, Action.SKIP, "succeeded; reprocess=failed"),
    ("failed", Reprocess.FAILED, Action.OVERRIDE, "failed; reprocess=failed"),
    ("success", Reprocess.COMPLETED, Action.OVERRIDE, "succeeded; reprocess=completed"),
    ("failed", Reprocess.COMPLETED, Action.OVERRIDE, "failed; reprocess=completed"),
])
def test_a_finished_live_run_is_skipped_or_overridden_by_the_policy(state: str, policy: Reprocess,
                                                                     action: Action, reason: str) -> None:
    assert decide_date(live(state), policy) == (action, reason)


@pytest.mark.parametrize("state", ["queued", "running"])
def test_an_unfinished_live_run_is_skipped_under_every_policy(state: str) -> None:
    for policy in Reprocess:
        action, reason = decide_date(live(state, 12, run_type="manual"), policy)
        assert action == Action.SKIP
        assert reason == f"manual run 12 is {state}, not finished"


@pytest.mark.parametrize("state", ["queued", "running", "success", "failed"])
def test_a_run_locked_by_a_live_job_is_skipped_as_in_flight(state: str) -> None:
    for policy in Reprocess:
        assert decide_date(live(state, holder=12, alive=True), policy) == (Action.SKIP, "in flight: locked by job 12")


def test_a_lock_whose_holder_stopped_heart_beating_does_not_count_as_in_flight() -> None:
    action, reason = decide_date(live("running", 3, holder=12, alive=False), Reprocess.COMPLETED)
    assert (action, reason) == (Action.SKIP, "scheduled run 3 is running, not finished")
    assert decide_date(live("failed", 3, holder=12, alive=False), Reprocess.FAILED)[0] == Action.OVERRIDE



def test_an_unfinished_backfill_run_no_live_job_holds_is_adopted_saying_truly_whose_it_was() -> None:
    """A self-executing backfill's run is left by a process that is gone; a `--submit` backfill never had one."""
    dead = LiveRun(3, "running", "backfill", 12, False, backfill_id=2)
    submitted = LiveRun(4, "queued", "backfill", None, False, backfill_id=5, submitted=True)
    assert decide_date(dead, Reprocess.NONE) == (
        Action.SKIP, "adopted: run 3 of backfill 2, whose process is gone, is finished by this backfill")
    assert decide_date(submitted, Reprocess.COMPLETED) == (
        Action.SKIP, "adopted: run 4 of submitted backfill 5, which no live job holds, is finished by this backfill")
    intervals = a_spec().schedule.intervals_between(T0, T0, start_date=T0, end_date=None)
    (item,) = plan_backfill(intervals, {T0: submitted}, Reprocess.NONE)
    assert item.adopts_backfill == 5


# -- plan_backfill -------------------------------------------------------------------------------------

def test_the_plan_has_one_item_per_date_in_date_order_with_the_replaced_run() -> None:
    intervals = a_spec().schedule.intervals_between(T0, T0.add(days=3), start_date=T0, end_date=None)
    runs: dict[datetime, LiveRun] = {T0.add(days=1): live("success", 21), T0.add(days=2): live("failed", 22),
            T0.add(days=3): live("running", 23, holder=5, alive=True)}
    plan = plan_backfill(intervals, runs, Reprocess.FAILED)
    assert [i.logical_date for i in plan] == days(1, 2, 3, 4)
    assert [(i.action, i.reason, i.replaces_run_id) for i in plan] == [
        (Action.NEW, "no live run at this date", None),
        (Action.SKIP, "succeeded; reprocess=failed", None),
        (Action.OVERRIDE, "failed; reprocess=failed", 22),
        (Action.SKIP, "in flight: locked by job 5", None),
    ]
    assert plan[0].interval.end == T0.add(days=1)


def test_a_backwards_plan_lists_the_newest_date_first() -> None:
    intervals = a_spec().schedule.intervals_between(T0, T0.add(days=4), start_date=T0, end_date=None)
    runs: dict[datetime, LiveRun] = {T0.add(days=4): live("success", 9)}
    forwards = plan_backfill(intervals, runs, Reprocess.COMPLETED)
    backwards = plan_backfill(intervals, runs, Reprocess.COMPLETED, backwards=True)
    assert [i.logical_date for i in backwards] == days(5, 4, 3, 2, 1)
    assert backwards == list(reversed(forwards))
    assert backwards[0].replaces_run_id == 9


def test_skipped_dates_never_name_a_run_to_replace() -> None:
    intervals = a_spec().schedule.intervals_between(T0, T0, start_date=T0, end_date=None)
    runs: dict[datetime, LiveRun] = {T0: live("success", 4)}
    (item,) = plan_backfill(intervals, runs, Reprocess.NONE)
    assert item.action == Action.SKIP and item.replaces_run_id is None


# -- backfill_intervals --------------------------------------------------------------------------------

def test_the_intervals_are_the_schedules_logical_dates_in_the_inclusive_range() -> None:
    intervals = backfill_intervals(a_spec(), T0.add(days=1), T0.add(days=3), now=NOW, backwards=False)
    assert [i.logical_date for i in intervals] == days(2, 3, 4)
    assert all(i.end == i.start.add(days=1) for i in intervals)


def test_a_range_partly_before_start_date_or_after_end_date_is_clipped() -> None:
    spec = a_spec(start_date=T0.add(days=2), end_date=T0.add(days=4))
    intervals = backfill_intervals(spec, T0, T0.add(days=8), now=NOW, backwards=False)
    assert [i.logical_date for i in intervals] == days(3, 4, 5)


def test_a_backwards_range_is_refused() -> None:
    with pytest.raises(InvalidInput, match="backwards"):
        backfill_intervals(a_spec(), T0.add(days=3), T0.add(days=1), now=NOW, backwards=False)


def test_a_backwards_range_is_refused_in_the_users_own_dates() -> None:
    spec = a_spec()
    end = parse_user_date("2024-03-01", timezone=spec.timezone, what="--end", end_of_day=True)
    start = parse_user_date("2024-03-02", timezone=spec.timezone, what="--start")
    with pytest.raises(InvalidInput) as refused:
        backfill_intervals(spec, start, end, now=NOW, backwards=False)
    assert str(refused.value) == "the range is backwards: --end 2024-03-01 is before --start 2024-03-02T00:00:00+00:00"


def test_a_range_reaching_past_the_last_ended_interval_is_refused_and_names_it() -> None:
    with pytest.raises(InvalidInput, match="past the last interval that has ended") as info:
        backfill_intervals(a_spec(), T0.add(days=7), T0.add(days=9), now=NOW, backwards=False)
    message = str(info.value)
    assert "2024-03-10T00:00:00+00:00" in message  # the first interval still open
    assert "the last one that has ended is 2024-03-09T00:00:00+00:00" in message


def test_the_interval_that_ends_exactly_now_may_be_backfilled() -> None:
    now = T0.add(days=9)  # 03-10 00:00: the 03-09 interval has just ended
    intervals = backfill_intervals(a_spec(), T0.add(days=7), T0.add(days=8), now=now, backwards=False)
    assert [i.logical_date for i in intervals] == days(8, 9)
    with pytest.raises(InvalidInput, match="past the last interval"):
        backfill_intervals(a_spec(), T0.add(days=7), T0.add(days=9), now=now, backwards=False)


def test_a_range_entirely_before_start_date_is_refused() -> None:
    spec = a_spec(start_date=T0.add(days=4))
    with pytest.raises(InvalidInput, match="before DAG 'd' starts"):
        backfill_intervals(spec, T0, T0.add(days=2), now=NOW, backwards=False)


def test_a_range_entirely_after_end_date_is_refused() -> None:
    spec = a_spec(end_date=T0.add(days=2))
    with pytest.raises(InvalidInput, match="after DAG 'd' ends"):
        backfill_intervals(spec, T0.add(days=4), T0.add(days=6), now=NOW, backwards=False)


def test_a_range_holding_no_tick_of_the_schedule_is_refused() -> None:
    spec = a_spec(schedule="@weekly")  # Sundays: 2024-03-03, 2024-03-10
    with pytest.raises(InvalidInput, match="no scheduled interval"):
        backfill_intervals(spec, T0.add(days=3), T0.add(days=5), now=NOW, backwards=False)


def test_backwards_is_refused_when_a_task_depends_on_the_past() -> None:
    with pytest.raises(InvalidInput, match="--backwards"):
        backfill_intervals(a_spec(depends_on_past=True), T0, T0.add(days=2), now=NOW, backwards=True)
    forwards = backfill_intervals(a_spec(depends_on_past=True), T0, T0.add(days=2), now=NOW, backwards=False)
    assert len(forwards) == 3
    assert len(backfill_intervals(a_spec(), T0, T0.add(days=2), now=NOW, backwards=True)) == 3


def test_refusing_a_range_that_reaches_far_into_the_future_enumerates_only_up_to_now() -> None:
    spec = a_spec(schedule="@hourly")
    asked: list[object] = []
    original = type(spec.schedule).intervals_between

    def spy(self: object, earliest: object, latest: object, **kw: object) -> object:
        asked.append(latest)
        return original(self, earliest, latest, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(spec.schedule), "intervals_between", spy)
        with pytest.raises(InvalidInput, match="past the last interval"):
            backfill_intervals(spec, T0, T0.add(years=50), now=NOW, backwards=False)
    assert asked == [NOW]


# -- blocking_run: overrides that depends_on_past would keep from ever starting ---------------------------

def two_day_plan(*actions: Action) -> list[Any]:
    from ledger.core.backfill_plan import PlanItem

    spec = a_spec()
    intervals = backfill_intervals(spec, T0.add(days=1), T0.add(days=len(actions)), now=NOW, backwards=False)
    return [PlanItem(i, a, "r", 9 if a == Action.OVERRIDE else None) for i, a in zip(intervals, actions, strict=True)]


def before(state: str = "failed", **task_states: str) -> PastRun:
    return PastRun(1, T0, "scheduled", state, task_states or {"a": "success", "b": "failed"})


@pytest.mark.parametrize(("plan_actions", "previous", "depends", "blocked"), [
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), before(), ["b"], True, id="overrides-after-a-failed-run"),
    pytest.param((Action.NEW, Action.OVERRIDE), before(), ["b"], True, id="a-new-run-first-then-an-override"),
    pytest.param((Action.NEW, Action.NEW), before(), ["b"], False, id="only-new-runs-wait-and-stop-later"),
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), before(), [], False, id="no-task-depends-on-the-past"),
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), before(), ["a"], False, id="that-task-succeeded-there"),
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), before(a="success"), ["b"], False,
                 id="that-task-is-not-in-its-version"),
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), before("success"), ["b"], False, id="previous-succeeded"),
    pytest.param((Action.SKIP, Action.OVERRIDE), before(), ["b"], False, id="a-kept-run-comes-first"),
    pytest.param((Action.OVERRIDE, Action.OVERRIDE), None, ["b"], False, id="no-run-before-the-range"),
])
def test_overrides_that_a_failed_previous_run_would_block_for_ever_are_found(
        plan_actions: tuple[Action, ...], previous: PastRun | None, depends: list[str], blocked: bool) -> None:
    found = blocking_run(two_day_plan(*plan_actions), previous, depends)
    assert (found is not None) == blocked
    if found is not None:
        assert found == (previous, ["b"])


# -- reconcile: what was shown, checked again at creation ---------------------------------------------

def test_a_date_whose_action_changed_since_the_plan_was_shown_is_skipped_with_the_reason() -> None:
    from ledger.core.backfill_plan import PlanItem, reconcile

    shown = two_day_plan(Action.NEW, Action.OVERRIDE)
    fresh = [PlanItem(shown[0].interval, Action.SKIP, "in flight: locked by job 5"),
             PlanItem(shown[1].interval, Action.OVERRIDE, "succeeded; reprocess=completed", 9)]
    done = reconcile(shown, fresh)
    assert [(i.action, i.reason) for i in done] == [
        (Action.SKIP, "changed since the plan was shown: in flight: locked by job 5"),
        (Action.OVERRIDE, "succeeded; reprocess=completed")]
    moved = [fresh[0], PlanItem(shown[1].interval, Action.OVERRIDE, "r", 10)]  # another run holds the date now
    assert reconcile(shown, moved)[1].action == Action.SKIP
