"""Creating due runs: fast-forward along each DAG's current schedule from its timeline.

The next interval is derived from the timeline itself (the latest live scheduled or backfill run),
never from a separately stored "next run" field, so rewriting history cannot leave it stale.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from ledger.core.schedule import After, DataInterval, ScheduleError, next_scheduled
from ledger.core.states import RunType
from ledger.core.versions import DagSpec
from ledger.models import DagRun
from ledger.scheduler.loop.memory import MemoryMismatch
from ledger.store import dags as dag_store
from ledger.store import loop as loop_store
from ledger.store import runs as run_store
from ledger.store.runs import resume_points

log = logging.getLogger(__name__)
MAX_NEW_RUNS_PER_DAG = 256  # per loop; catch-up continues on the next loop


def _upcoming(spec: DagSpec, after: After, now: datetime,
              held: Collection[datetime] = ()) -> list[DataInterval]:
    return next_scheduled(spec.schedule, start_date=spec.start_date, end_date=spec.end_date,
                          after=after, now=now, catchup=spec.catchup, held=held,  # type: ignore[arg-type]
                          n=MAX_NEW_RUNS_PER_DAG)


def due_for(spec: DagSpec, after: After, now: datetime,
            held: Collection[datetime] = ()) -> list[DataInterval]:
    """The intervals to create now: the first of `next_scheduled` that have ended (the same rule that
    `ledger dags next-runs` prints)."""
    return list(itertools.takewhile(lambda i: i.end <= now, _upcoming(spec, after, now, held)))


@dataclass
class DueCache:
    """What a job learnt while looking for due runs: for a DAG with nothing due, when its next interval
    ends (None: never, its end_date has passed), keyed on its version and the interval of its latest live
    scheduled or backfill run. Until then, looking again is skipped: the schedule's arithmetic is the
    costliest part of a scheduling pass. A new version or a change to the timeline changes the key."""

    nothing_until: dict[str, tuple[str, After, datetime | None]] = field(default_factory=dict)

    def nothing_due(self, dag_id: str, version: str, after: After, now: datetime) -> bool:
        known = self.nothing_until.get(dag_id)
        return known is not None and known[:2] == (version, after) and (known[2] is None or now < known[2])


@dataclass
class SchedulingReads:
    """On SQLite, what a scheduling pass reads before it looks for due runs (the schedulable DAGs and their resume
    points), kept for the next pass while the job's quiet mark stays the same (DagRunJob.quiet_mark: nobody else
    committed, and no transaction of the job locked a timeline, which every change to runs' resume points does):
    the database then holds what they were read from (decision 0309). Verify mode reads them again and compares."""

    verify: bool = False
    mark: tuple[int, int] | None = None
    dags: list[tuple[str, str, str]] = field(default_factory=list)
    resume: dict[str, DataInterval] = field(default_factory=dict)

    def read(self, session: Session, mark: tuple[int, int] | None
             ) -> tuple[list[tuple[str, str, str]], dict[str, DataInterval]]:
        if mark is not None and mark == self.mark:
            if self.verify:
                dags = dag_store.schedulable(session)
                found = (dags, resume_points(session, [d for d, _, _ in dags]))
                if found != (self.dags, self.resume):
                    raise MemoryMismatch(f"the schedulable DAGs and resume points kept {(self.dags, self.resume)} "
                                         f"are not those in the database {found}")
            return self.dags, self.resume
        self.dags = dag_store.schedulable(session)
        self.resume = resume_points(session, [d for d, _, _ in self.dags])
        self.mark = mark
        return self.dags, self.resume

    def forget(self) -> None:
        self.mark = None


def create_due_runs(session: Session, *, now: datetime, actor: str, dag_ids: list[str] | None = None,
                    cache: DueCache | None = None, dags: list[tuple[str, str, str]] | None = None,
                    resume: dict[str, DataInterval] | None = None) -> list[DagRun]:
    """Create (and splice) every due run of every active, unpaused DAG; dates already held by a live
    run (for example a manual one) are skipped, not created twice. `dags`: those DAGs as dag_store.schedulable read
    them in this transaction (they are read otherwise), `resume`: their resume points (SchedulingReads)."""
    if dags is None:
        dags = dag_store.schedulable(session, dag_ids)
    if resume is None:
        resume = resume_points(session, [d for d, _, _ in dags])
    created: list[DagRun] = []
    for dag_id, version, _fileloc in dags:
        after = resume.get(dag_id)
        if cache is not None and cache.nothing_due(dag_id, version, after, now):
            continue
        spec = dag_store.spec(session, dag_id, version)
        try:
            upcoming = _upcoming(spec, after, now)
        except ScheduleError as exc:  # a custom timetable that fails: its DAG waits, the others go on
            log.warning("DAG %s: no run created: %s", dag_id, exc)
            continue
        if not upcoming or upcoming[0].end > now:  # nothing has ended since the latest run
            if cache is not None:
                cache.nothing_until[dag_id] = (version, after, upcoming[0].end if upcoming else None)
            continue
        # something is due: lock the timeline, then read it again (a backfill may have just spliced)
        run_store.lock_timeline(session, dag_id)
        locked_after = resume_points(session, [dag_id]).get(dag_id)
        intervals = list(itertools.takewhile(lambda i: i.end <= now, upcoming)) if locked_after == after \
            else due_for(spec, locked_after, now)  # (the schedule's arithmetic is done again only if it moved)
        if not intervals:
            continue
        held = run_store.live_dates_from(session, dag_id, intervals[0].start, until=intervals[-1].start)
        todo = [i for i in intervals if i.logical_date not in held]
        ids = run_store.splice_many(session, spec, [run_store.NewRun(i, RunType.SCHEDULED) for i in todo],
                                    now=now, actor=actor, lock=False)
        if ids:
            created.extend(sorted(loop_store.runs_by_id(session, ids).values(), key=lambda r: r.logical_date))
    return created
