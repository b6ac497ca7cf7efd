"""Planning a backfill: for each logical date of the range, new / override / skip, with the reason.

Pure: the intervals, the live runs at those dates and the policy in, the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import pendulum
from pendulum import DateTime

from ledger.errors import InvalidInput
from ledger.schedule import DataInterval
from ledger.versions import DagSpec


class Reprocess(StrEnum):
    NONE = "none"  # only dates without a live run
    FAILED = "failed"  # also re-run dates whose live run failed
    COMPLETED = "completed"  # also re-run dates whose live run finished, successfully or not


class Action(StrEnum):
    NEW = "new"
    OVERRIDE = "override"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class LiveRun:
    run_id: int
    state: str
    run_type: str
    lock_holder: int | None  # a job holding the run
    holder_alive: bool  # whether that job is still heart-beating
    backfill_id: int | None = None  # the backfill that created it


@dataclass(frozen=True, slots=True)
class PlanItem:
    interval: DataInterval
    action: Action
    reason: str
    replaces_run_id: int | None = None
    adopts_backfill: int | None = None  # the date's run is an unfinished run of this dead backfill: finish it

    @property
    def logical_date(self) -> datetime:
        return self.interval.logical_date


def decide_date(live: LiveRun | None, policy: Reprocess) -> tuple[Action, str]:
    if live is None:
        return Action.NEW, "no live run at this date"
    if live.lock_holder is not None and live.holder_alive:
        return Action.SKIP, f"in flight: locked by job {live.lock_holder}"
    if live.state in ("queued", "running"):
        if live.backfill_id is not None and live.run_type == "backfill":
            return Action.SKIP, (f"adopted: run {live.run_id} of backfill {live.backfill_id}, whose process is gone, "
                                 "is finished by this backfill")
        return Action.SKIP, f"{live.run_type} run {live.run_id} is {live.state}, not finished"
    word = "succeeded" if live.state == "success" else live.state
    if policy == Reprocess.COMPLETED or (policy == Reprocess.FAILED and live.state == "failed"):
        return Action.OVERRIDE, f"{word}; reprocess={policy.value}"
    return Action.SKIP, f"{word}; reprocess={policy.value}"


def plan_backfill(intervals: Sequence[DataInterval], live: Mapping[datetime, LiveRun], policy: Reprocess,
                  *, backwards: bool = False) -> list[PlanItem]:
    items = []
    for interval in intervals:
        existing = live.get(interval.logical_date)
        action, reason = decide_date(existing, policy)
        adopts = existing.backfill_id if existing is not None and reason.startswith("adopted:") else None
        items.append(PlanItem(interval, action, reason,
                              existing.run_id if existing is not None and action == Action.OVERRIDE else None,
                              adopts))
    return list(reversed(items)) if backwards else items


def _local(value: datetime, spec: DagSpec) -> str:
    """A time as the DAG's users read it: in the DAG's time zone, with its offset."""
    return pendulum.instance(value).in_timezone(spec.timezone).isoformat()


def backfill_intervals(spec: DagSpec, start: DateTime, end: DateTime, *, now: datetime,
                       backwards: bool) -> list[DataInterval]:
    """The schedule's intervals with logical dates in [start, end], or a clear refusal."""
    if end < start:
        raise InvalidInput(f"the range is backwards: --end {_local(end, spec)} is before --start {_local(start, spec)}")
    if backwards and any(t.depends_on_past for t in spec.tasks.values()):
        raise InvalidInput(f"--backwards cannot be used with DAG {spec.dag_id!r}: its tasks depend on the past, "
                           "so its dates must run in chain order")
    if spec.end_date is not None and start > spec.end_date:
        raise InvalidInput(f"the range starts after DAG {spec.dag_id!r} ends ({_local(spec.end_date, spec)})")
    if end < spec.start_date:
        raise InvalidInput(f"the range ends before DAG {spec.dag_id!r} starts ({_local(spec.start_date, spec)})")
    # only intervals up to now are enumerated: a typo like --end 2099-01-01 is refused at once
    intervals = spec.schedule.intervals_between(start, min(end, pendulum.instance(now)), start_date=spec.start_date,
                                                end_date=spec.end_date)
    following = spec.schedule.next_interval(after=intervals[-1].end if intervals else start,
                                            start_date=spec.start_date, end_date=spec.end_date)
    beyond = following if following is not None and following.logical_date <= end else None
    open_ones = [i for i in intervals if i.end > now] + ([beyond] if beyond is not None else [])
    if open_ones:
        ended = [i for i in intervals if i.end <= now]
        hint = f"; the last one that has ended is {_local(ended[-1].logical_date, spec)}" if ended else ""
        raise InvalidInput(f"the range reaches past the last interval that has ended: the interval at "
                           f"{_local(open_ones[0].logical_date, spec)} ends {_local(open_ones[0].end, spec)}{hint}")
    if not intervals:
        raise InvalidInput(f"DAG {spec.dag_id!r} has no scheduled interval between {_local(start, spec)} and "
                           f"{_local(end, spec)} (schedule {spec.schedule.summary()})")
    return intervals


def reconcile(shown: list[PlanItem], fresh: list[PlanItem]) -> list[PlanItem]:
    """The plan to execute: what was shown (and confirmed), re-checked against the timeline as it is now.

    A date whose action changed since it was shown is skipped with the reason, never overridden or
    created without confirmation.
    """
    before = {i.logical_date: i for i in shown}
    out = []
    for item in fresh:
        was = before.get(item.logical_date)
        if was is None or (was.action == item.action and was.replaces_run_id == item.replaces_run_id):
            out.append(item)
        else:
            out.append(PlanItem(item.interval, Action.SKIP, f"changed since the plan was shown: {item.reason}"))
    return out
