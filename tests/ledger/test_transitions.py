"""The table of allowed state changes (ledger/core/states.py): every state a run or task instance can take is in it,
what is finished can only be cleared, marked or moved, and an overridden run never comes back."""

from __future__ import annotations

import pytest

from ledger.core.states import (
    FINISHED_TASK_STATES,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    RunState,
    TaskState,
    run_may_move,
    task_may_move,
)


def test_every_task_state_but_lost_is_a_target_and_lost_is_only_a_try_state() -> None:
    assert set(TASK_TRANSITIONS) == set(TaskState) - {TaskState.LOST}
    assert all(TaskState.LOST not in sources for sources in TASK_TRANSITIONS.values())


def test_every_run_state_is_a_target_and_nothing_leaves_overridden() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    assert all(RunState.OVERRIDDEN not in sources for sources in RUN_TRANSITIONS.values())


@pytest.mark.parametrize("before", sorted(FINISHED_TASK_STATES))
def test_a_finished_task_instance_is_never_queued_or_started_without_a_new_try(before: TaskState) -> None:
    assert not task_may_move(before, TaskState.QUEUED)
    assert not task_may_move(before, TaskState.RUNNING)
    assert task_may_move(before, TaskState.SCHEDULED)  # a clear


def test_only_a_queued_try_starts_and_only_an_active_one_retries() -> None:
    assert [s for s in TaskState if s != TaskState.LOST and task_may_move(s, TaskState.RUNNING)] == [TaskState.QUEUED]
    assert TASK_TRANSITIONS[TaskState.UP_FOR_RETRY] == {TaskState.QUEUED, TaskState.RUNNING}


def test_a_run_starts_only_from_queued_and_is_queued_again_only_from_an_end() -> None:
    assert RUN_TRANSITIONS[RunState.RUNNING] == {RunState.QUEUED}
    assert run_may_move(RunState.SUCCESS, RunState.QUEUED) and not run_may_move(RunState.RUNNING, RunState.QUEUED)
