"""Planning a backfill: for each logical date of the range, new / override / skip, with the reason.

Pure: the intervals, the live runs at those dates and the policy in, the plan out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import pendulum
from pendulum import DateTime

from ledger.core.dataset_rules import leaf_keys
from ledger.core.errors import InvalidInput
from ledger.core.schedule import DataInterval
from ledger.core.states import UNFINISHED_RUN_STATES
from ledger.core.versions import DagSpec


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
    submitted: bool = False  # that backfill was `--submit`: it had no process of its own, schedulers run its runs


@dataclass(frozen=True, slots=True)
class PlanItem:
    interval: DataInterval
    action: Action
    reason: str
    replaces_run_id: int | None = None
    adopts_backfill: int | None = None  # the date's run is an unfinished run of this dead backfill: finish it
    adopts_run_id: int | None = None  # that run

    @property
    def logical_date(self) -> datetime:
        return self.interval.logical_date


def decide_date(live: LiveRun | None, policy: Reprocess) -> tuple[Action, str]:
    if live is None:
        return Action.NEW, "no live run at this date"
    if live.lock_holder is not None and live.holder_alive:
        return Action.SKIP, f"in flight: locked by job {live.lock_holder}"
    if live.state in UNFINISHED_RUN_STATES:
        if live.backfill_id is not None and live.run_type == "backfill":
            whose = (f"submitted backfill {live.backfill_id}, which no live job holds" if live.submitted
                     else f"backfill {live.backfill_id}, whose process is gone")
            return Action.SKIP, f"adopted: run {live.run_id} of {whose}, is finished by this backfill"
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
                              adopts, existing.run_id if existing is not None and adopts is not None else None))
    return list(reversed(items)) if backwards else items


@dataclass(frozen=True, slots=True)
class PastRun:
    """The live run just before the range, with the states of its task instances (absent: not in its version)."""

    run_id: int
    logical_date: datetime
    run_type: str
    state: str
    task_states: Mapping[str, str]


def blocking_run(plan: Sequence[PlanItem], before: PastRun | None,
                 depends_on_past: Collection[str]) -> tuple[PastRun, list[str]] | None:
    """The run before the range when it would keep the plan's runs from ever starting while the plan replaces
    finished runs: the first date the plan creates follows it in the chain, it has failed, and a task that
    depends on the past did not succeed in it. Returns that run and those tasks.

    None when the plan overrides nothing: new runs displace no history, so they are created, wait, and the
    backfill stops saying why (as before)."""
    if before is None or before.state != "failed" or not any(i.action == Action.OVERRIDE for i in plan):
        return None
    ordered = sorted(plan, key=lambda i: i.logical_date)
    first = next((i for i in ordered if i.action != Action.SKIP), None)
    if first is None or any(i.action == Action.SKIP for i in ordered if i.logical_date < first.logical_date):
        return None  # a skipped date holds a live run that the first created run follows instead
    ok = {"success", "skipped", "stopped"}  # ledger.core.dependencies.OK_FOR_PAST
    tasks = sorted(t for t in depends_on_past if t in before.task_states and before.task_states[t] not in ok)
    return (before, tasks) if tasks else None


def local(value: datetime, spec: DagSpec) -> str:
    """A time as the DAG's users read it: in the DAG's time zone, with its offset. The last instant of a day
    (how `--end 2024-03-01` is read: the whole day) is that day's date, as the user wrote it."""
    moment = pendulum.instance(value).in_timezone(spec.timezone)
    if moment.add(microseconds=1).day != moment.day:
        return moment.date().isoformat()
    return moment.isoformat()


def backfill_intervals(spec: DagSpec, start: DateTime, end: DateTime, *, now: datetime,
                       backwards: bool) -> list[DataInterval]:
    """The schedule's intervals with logical dates in [start, end], or a clear refusal."""
    if end < start:
        raise InvalidInput(f"the range is backwards: --end {local(end, spec)} is before --start {local(start, spec)}")
    if backwards and any(t.depends_on_past for t in spec.tasks.values()):
        raise InvalidInput(f"--backwards cannot be used with DAG {spec.dag_id!r}: its tasks depend on the past, "
                           "so its dates must run in chain order")
    if spec.end_date is not None and start > spec.end_date:
        raise InvalidInput(f"the range starts after DAG {spec.dag_id!r} ends ({local(spec.end_date, spec)})")
    if end < spec.start_date:
        raise InvalidInput(f"the range ends before DAG {spec.dag_id!r} starts ({local(spec.start_date, spec)})")
    # only intervals up to now are enumerated: a typo like --end 2099-01-01 is refused at once
    intervals = spec.schedule.intervals_between(start, min(end, pendulum.instance(now)), start_date=spec.start_date,
                                                end_date=spec.end_date)
    following = spec.schedule.next_interval(after=intervals[-1].end if intervals else start,
                                            start_date=spec.start_date, end_date=spec.end_date)
    beyond = following if following is not None and following.logical_date <= end else None
    open_ones = [i for i in intervals if i.end > now] + ([beyond] if beyond is not None else [])
    if open_ones:
        ended = [i for i in intervals if i.end <= now]
        hint = f"; the last one that has ended is {local(ended[-1].logical_date, spec)}" if ended else ""
        raise InvalidInput(f"the range reaches past the last interval that has ended: the interval at "
                           f"{local(open_ones[0].logical_date, spec)} ends {local(open_ones[0].end, spec)}{hint}")
    if not intervals and spec.datasets is not None:
        read = ", ".join(k.split(":", 1)[1] for k in leaf_keys(spec.datasets["condition"]) if k.startswith("dataset:"))
        raise InvalidInput(f"DAG {spec.dag_id!r} is scheduled on datasets ({read}), not on a time schedule: its runs "
                           f"follow its upstream's writes; re-run them with `ledger backfill <producer> ... "
                           f"--downstream`, or one date with `ledger trigger {spec.dag_id} --logical-date D --replace`")
    if not intervals:
        raise InvalidInput(f"DAG {spec.dag_id!r} has no scheduled interval between {local(start, spec)} and "
                           f"{local(end, spec)} (schedule {spec.schedule.summary()})")
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
