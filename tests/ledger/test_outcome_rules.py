"""What a finished try becomes is a pure rule (ledger/core/outcomes.py), and every move it returns is one the
transition table allows from the task instance's current state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.outcomes import Current, Outcome, decide, decide_all
from ledger.core.states import ACTIVE_TASK_STATES, TaskState, task_may_move

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
REPORTED = [TaskState.RUNNING, TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED, TaskState.LOST,
            TaskState.UP_FOR_RESCHEDULE, TaskState.STOPPED]


def outcome(state: TaskState, try_number: int = 1, **kw: object) -> Outcome:
    return Outcome(7, try_number, state, NOW - timedelta(seconds=5), **kw)  # type: ignore[arg-type]


def current(try_number: int = 1, max_tries: int = 1, state: TaskState = TaskState.RUNNING, **kw: object) -> Current:
    return Current(try_number, max_tries, state, **kw)  # type: ignore[arg-type]


@given(reported=st.sampled_from(REPORTED), was=st.sampled_from(list(TaskState)),
       try_number=st.integers(1, 4), max_tries=st.integers(1, 4), requeue=st.booleans(), no_retry=st.booleans(),
       may_requeue=st.booleans(), lost_in_a_row=st.integers(0, 5), max_lost=st.integers(1, 4))
def test_every_decision_is_an_allowed_transition_from_the_current_state(
        reported: TaskState, was: TaskState, try_number: int, max_tries: int, requeue: bool, no_retry: bool,
        may_requeue: bool, lost_in_a_row: int, max_lost: int) -> None:
    o = outcome(reported, try_number, requeue=requeue, no_retry=no_retry, retry_delay=30.0)
    found = current(try_number, max_tries, was, may_requeue=may_requeue, lost_in_a_row=lost_in_a_row)
    d = decide(o, found, now=NOW, max_lost_tries=max_lost)
    if was not in ACTIVE_TASK_STATES:
        assert d is None  # another writer ended it first: the report changes nothing
        return
    assert d is not None and d.was == was
    assert task_may_move(was, d.state) or d.state == was == TaskState.RUNNING
    assert (d.next_try_at is not None) == (d.state in (TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE))
    assert d.one_more_try == (d.state in (TaskState.SCHEDULED, TaskState.UP_FOR_RESCHEDULE))


def test_a_report_of_an_earlier_try_is_ignored() -> None:
    assert decide(outcome(TaskState.SUCCESS, 1), current(2), now=NOW, max_lost_tries=3) is None
    assert decide(outcome(TaskState.SUCCESS), None, now=NOW, max_lost_tries=3) is None


def test_a_failure_with_tries_left_is_up_for_retry_after_its_delay_from_now() -> None:
    d = decide(outcome(TaskState.FAILED, retry_delay=30.0), current(max_tries=2), now=NOW, max_lost_tries=3)
    assert d is not None and (d.state, d.try_state, d.next_try_at) == (
        TaskState.UP_FOR_RETRY, TaskState.FAILED, NOW + timedelta(seconds=30))


@pytest.mark.parametrize(("o", "expected"), [
    (outcome(TaskState.FAILED, 2), TaskState.FAILED),  # the last try allowed
    (outcome(TaskState.FAILED, no_retry=True), TaskState.FAILED),  # FailWithoutRetry
    (outcome(TaskState.SUCCESS), TaskState.SUCCESS),
    (outcome(TaskState.SKIPPED), TaskState.SKIPPED),
])
def test_a_try_that_ends_on_its_own_account_ends_its_task_instance(o: Outcome, expected: TaskState) -> None:
    d = decide(o, current(o.try_number, max_tries=2), now=NOW, max_lost_tries=3)
    assert d is not None and d.state == expected and not d.one_more_try


@pytest.mark.parametrize(("may_requeue", "lost_in_a_row", "expected"), [
    (True, 0, TaskState.SCHEDULED), (True, 2, TaskState.FAILED), (False, 0, TaskState.STOPPED)])
def test_a_lost_try_gets_a_new_try_unless_too_many_were_lost_or_its_run_ended(
        may_requeue: bool, lost_in_a_row: int, expected: TaskState) -> None:
    d = decide(outcome(TaskState.LOST), current(may_requeue=may_requeue, lost_in_a_row=lost_in_a_row), now=NOW,
               max_lost_tries=3)
    assert d is not None and (d.state, d.try_state) == (expected, TaskState.LOST)
    assert d.one_more_try == (expected == TaskState.SCHEDULED)


def test_a_try_that_never_started_is_requeued_at_no_cost_or_stays_stopped() -> None:
    o = outcome(TaskState.FAILED, requeue=True, armed=True)
    requeued = decide(o, current(state=TaskState.QUEUED), now=NOW, max_lost_tries=3)
    kept = decide(o, current(state=TaskState.QUEUED, may_requeue=False), now=NOW, max_lost_tries=3)
    assert requeued is not None and (requeued.state, requeued.try_state, requeued.one_more_try) == (
        TaskState.SCHEDULED, TaskState.STOPPED, True)
    assert kept is not None and (kept.state, kept.try_state, kept.one_more_try) == (
        TaskState.STOPPED, TaskState.STOPPED, False)


def test_a_sensor_that_asks_to_be_checked_later_waits_until_then_at_no_cost() -> None:
    later = NOW + timedelta(minutes=5)
    d = decide(outcome(TaskState.UP_FOR_RESCHEDULE, reschedule_at=later), current(), now=NOW, max_lost_tries=3)
    assert d is not None and (d.state, d.next_try_at, d.one_more_try) == (TaskState.UP_FOR_RESCHEDULE, later, True)


def test_a_start_and_its_end_in_one_batch_are_decided_in_order() -> None:
    found = {7: current(state=TaskState.QUEUED)}
    started, ended = decide_all([outcome(TaskState.RUNNING), outcome(TaskState.SUCCESS)], found, max_lost_tries=3,
                                now=NOW)
    assert (started.was, started.state, ended.was, ended.state) == (
        TaskState.QUEUED, TaskState.RUNNING, TaskState.RUNNING, TaskState.SUCCESS)
    assert decide_all([outcome(TaskState.SUCCESS)], found, max_lost_tries=3) == []  # it has ended: ignored
