"""The timeline: per DAG, the live runs form one chain ordered by logical date through `previous`.

Pure domain code (no database, no clock). The store loads the neighbours of a date with a constant
number of indexed queries, asks `plan_splice` what to change, and writes the answer back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ledger.core.errors import TimelineConflict

NEW = -1  # stands for the run being spliced in, whose id the database has not given yet


@dataclass(frozen=True, slots=True)
class Link:
    run_id: int
    logical_date: datetime


@dataclass(frozen=True, slots=True)
class Neighbours:
    """The live runs around a date: the latest before it, the one at it, the earliest after it."""

    before: Link | None
    at: Link | None
    after: Link | None


@dataclass(frozen=True, slots=True)
class SplicePlan:
    previous: int | None  # the new run's previous
    relink: int | None  # the run after the new one, whose previous becomes the new run
    displaced: int | None  # the live run at the same date, which becomes overridden


def plan_splice(around: Neighbours, *, replace: bool, where: str = "") -> SplicePlan:
    """Where a new run enters the chain, and which live run (if any) it displaces.

    A live run already at the date is a conflict unless `replace`: then the new run takes its place.
    """
    if around.at is not None and not replace:
        raise TimelineConflict(
            f"a live run (id {around.at.run_id}) already holds {around.at.logical_date.isoformat()}"
            f"{' for ' + where if where else ''}; use --replace to override it"
        )
    return SplicePlan(
        previous=around.before.run_id if around.before else None,
        relink=around.after.run_id if around.after else None,
        displaced=around.at.run_id if around.at else None,
    )


@dataclass(frozen=True, slots=True)
class ChainRun:
    """What the invariant needs to know about a run."""

    run_id: int
    logical_date: datetime
    previous: int | None
    live: bool
    overridden_by: int | None = None


def chain_violations(runs: Iterable[ChainRun]) -> list[str]:
    """Every way the runs of one DAG break the timeline invariant (empty when it holds).

    Walking `previous` from the newest live run must visit every live run once, newest first; at
    most one live run per date; overridden runs point at the run that displaced them.
    """
    runs = list(runs)
    problems: list[str] = []
    live = sorted((r for r in runs if r.live), key=lambda r: r.logical_date)
    by_id = {r.run_id: r for r in runs}
    dates = [r.logical_date for r in live]
    if len(set(dates)) != len(dates):
        problems.append("two live runs share a logical date")
    for i, run in enumerate(live):
        expected = live[i - 1].run_id if i else None
        if run.previous != expected:
            problems.append(f"run {run.run_id}: previous is {run.previous}, expected {expected}")
    for run in runs:
        if not run.live and (run.overridden_by is None or run.overridden_by not in by_id):
            problems.append(f"overridden run {run.run_id} does not point to the run that replaced it")
    if live:
        seen: list[int] = []
        cursor: int | None = live[-1].run_id
        while cursor is not None and len(seen) <= len(live):
            seen.append(cursor)
            cursor = by_id[cursor].previous if cursor in by_id else None
        if seen != [r.run_id for r in reversed(live)]:
            problems.append("walking previous from the newest live run does not visit every live run once")
    return problems


def neighbours_in(live: Sequence[Link], at: datetime) -> Neighbours:
    """Neighbours of a date in a list of live links sorted by date (for in-memory timelines)."""
    before = None
    same = None
    after = None
    for link in live:
        if link.logical_date < at:
            before = link
        elif link.logical_date == at:
            same = link
        elif after is None:
            after = link
    return Neighbours(before, same, after)


@dataclass(frozen=True, slots=True)
class ChainLink:
    """A live run as the batch planner sees it: its date and its current previous."""

    run_id: int
    logical_date: datetime
    previous: int | None


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Many runs spliced at once. New runs are referred to by their index in the request."""

    displaced: dict[int, int]  # new index -> live run it overrides
    new_previous: dict[int, tuple[str, int] | None]  # new index -> ("old", run id) | ("new", index) | None
    relink: dict[int, tuple[str, int]]  # old run id -> its new previous (only where it changes)


def plan_batch(window: Sequence[ChainLink], dates: Sequence[datetime], replace: Sequence[bool],
               where: str = "") -> BatchPlan:
    """Where each of many new runs (distinct dates) enters a chain, with one pass over the window.

    `window` holds the live runs from the one before the earliest new date to the one after the
    latest, sorted by date. The result keeps the invariant: every live run's previous is the live
    run with the greatest earlier date.
    """
    by_date = {link.logical_date: link for link in window}
    displaced: dict[int, int] = {}
    for i, (at, rep) in enumerate(zip(dates, replace, strict=True)):
        held = by_date.get(at)
        if held is not None:
            if not rep:
                raise TimelineConflict(f"a live run (id {held.run_id}) already holds {at.isoformat()}"
                                       f"{' for ' + where if where else ''}; use --replace to override it")
            displaced[i] = held.run_id
    gone = set(displaced.values())
    entries: list[tuple[datetime, int, tuple[str, int]]] = [
        (link.logical_date, 0, ("old", link.run_id)) for link in window if link.run_id not in gone]
    entries += [(at, 1, ("new", i)) for i, at in enumerate(dates)]
    entries.sort(key=lambda e: (e[0], e[1]))
    current = {link.run_id: link.previous for link in window}
    new_previous: dict[int, tuple[str, int] | None] = {}
    relink: dict[int, tuple[str, int]] = {}
    before: tuple[str, int] | None = None
    for _, _, ref in entries:
        kind, key = ref
        if kind == "new":
            new_previous[key] = before
        elif before is not None and before[0] == "new":
            relink[key] = before
        elif before is not None and current[key] != before[1]:
            relink[key] = before  # an old run whose old previous was displaced
        before = ref
    return BatchPlan(displaced, new_previous, relink)
