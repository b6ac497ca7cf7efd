"""What a try's report makes of its task instance: the pure rule, checked against the transition table.

An executor reports that a try started or ended (success, failed, skipped, lost, up_for_reschedule; the job makes
a killed try's end `stopped`). What the task instance becomes follows from the report and from a few facts the
store reads in the same transaction (the task instance's current try and state, its retries, whether its run is
still unfinished with no stop pending, how many of its tries were lost in a row): `decide` says it, with the time
`now` passed in, and the store writes what it is told (ledger/store/tasks.py write_outcomes), guarded on the state
it replaces. Every move `decide` returns is allowed by TASK_TRANSITIONS (tests/ledger/test_outcome_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.core.states import ACTIVE_TASK_STATES, TaskState, task_may_move


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an executor reported of one try, as the job hands it to the rule."""

    ti_id: int
    try_number: int
    state: TaskState  # running, success, failed, skipped, lost, up_for_reschedule, stopped
    at: datetime
    pid: int | None = None
    hostname: str | None = None
    reason: str | None = None
    retry_delay: float = 0.0
    # the job's clock when it recorded the outcome: a retry's due time counts from it, since the job compares
    # due times with its clock (`at` is the executor's wall time, what happened, kept for the record)
    decided_at: datetime | None = None
    # a try that never started though nobody stopped it (it waited in a worker when the job stopped): the try is
    # recorded stopped, and the task instance waits for a new try, with one more try allowed so that this one
    # costs it no retry, armed again if a signal's START had armed it (`armed`). Unless a stop is pending on it
    # or its run has ended: then it stays stopped.
    requeue: bool = False
    armed: bool = False
    # a sensor's try that asked to be checked again (up_for_reschedule): when; its next try spends no retry
    reschedule_at: datetime | None = None
    no_retry: bool = False  # a failure that spends no retry left (a sensor's timeout, FailWithoutRetry)


@dataclass(frozen=True, slots=True)
class Current:
    """What the database holds of an outcome's task instance, read in the recording transaction."""

    try_number: int
    max_tries: int
    state: TaskState
    may_requeue: bool = True  # its run is unfinished and no stop is pending on it (asked of lost / requeued ones)
    lost_in_a_row: int = 0  # how many of its latest ended tries were lost, in a row (asked of lost ones)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to write for one outcome: the task instance's new state, its try's, when it may be tried next, and
    whether it gets one more try (this try spent no retry)."""

    outcome: Outcome
    was: TaskState
    state: TaskState
    try_state: TaskState
    next_try_at: datetime | None = None
    one_more_try: bool = False


def decide(o: Outcome, current: Current | None, *, now: datetime, max_lost_tries: int) -> Decision | None:
    """What the task instance becomes by outcome `o`; None: the outcome is of a try that is no longer the current
    one, or whose task instance no longer waits for it (another writer ended it first), and is ignored."""
    if current is None or current.try_number != o.try_number or current.state not in ACTIVE_TASK_STATES:
        return None
    state, try_state, next_try = o.state, o.state, None
    if o.requeue and state == TaskState.FAILED:
        state = TaskState.SCHEDULED if current.may_requeue else TaskState.STOPPED
        try_state = TaskState.STOPPED
    elif state == TaskState.LOST:
        if not current.may_requeue:  # its run ended, or a stop is pending on it
            state = TaskState.STOPPED
        elif current.lost_in_a_row + 1 >= max_lost_tries:
            state = TaskState.FAILED
        else:
            state = TaskState.SCHEDULED
    elif state == TaskState.FAILED and o.try_number < current.max_tries and not o.no_retry:
        state = TaskState.UP_FOR_RETRY
        next_try = now + timedelta(seconds=o.retry_delay)
    elif state == TaskState.UP_FOR_RESCHEDULE:
        next_try = o.reschedule_at or now
    restated = state == current.state == TaskState.RUNNING  # a start reported again (an adopted try): no move
    if not restated and not task_may_move(current.state, state):  # (the table has the last word)
        raise ValueError(f"task instance {o.ti_id}: {current.state.value} -> {state.value} is not an allowed "
                         "transition")
    return Decision(o, current.state, state, try_state, next_try,
                    one_more_try=state in (TaskState.SCHEDULED, TaskState.UP_FOR_RESCHEDULE))


def decide_all(outcomes: list[Outcome], current: dict[int, Current], *, max_lost_tries: int,
               now: datetime | None = None) -> list[Decision]:
    """`decide` for each outcome in order, at its decided_at (else `now`, else when it happened); an outcome sees
    the state the ones before it gave its task instance (a start, then its end, in one batch)."""
    out = []
    for o in outcomes:
        found = current.get(o.ti_id)
        decision = decide(o, found, now=o.decided_at or now or o.at, max_lost_tries=max_lost_tries)
        if decision is None:
            continue
        assert found is not None
        current[o.ti_id] = Current(found.try_number, found.max_tries, decision.state, found.may_requeue,
                                   found.lost_in_a_row)
        out.append(decision)
    return out
