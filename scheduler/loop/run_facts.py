"""What a job reads once and keeps while it holds runs: facts that do not change, or that only it changes.

- the values each held run's tasks passed on (this job is the only writer of its held runs' tries: it adds what
  each try pushed as it records the try);
- each run's data interval, logical date and DAG (they never change);
- where each DAG's file is (read again when DAG files were parsed);
- each pool's slots (read again after another process wrote: a pool changes with an event);
- each held run's prior successful run (`prev_*_success`): read once per run, then kept up to date as the job's own
  runs succeed; read again after another process wrote or runs were created (either may change it);
- the DAGs paused with --stop-queued (read again every poll_interval);
- the database's identity, which its tries' task ids carry (it never changes: decision 0344);
- each DAG's task instances queued or running (max_active_tasks), as a bound: what was read, plus the tries the job
  queued since, while its quiet mark (decision 0309) stays what it was at the read; used instead of a read only where
  no candidate could be refused for its DAG's limit (decision 0329).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from ledger.infra.workers import DatabaseIdentity
from ledger.models import DagRun
from ledger.scheduler.loop.cadence import Cadence
from ledger.store import identity as identity_store
from ledger.store import loop as loop_store
from ledger.store import prior_runs
from ledger.store import tasks as task_store
from ledger.store import xcom as xcom_store

_MANY = 100_000  # a long-lived job's runs come and go: its per-run facts are dropped beyond this many


@dataclass
class RunFacts:
    holding_cadence: Cadence
    values: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)  # held run -> its stored values
    intervals: dict[int, tuple[str, str]] = field(default_factory=dict)  # run -> data interval (ISO)
    dates: dict[int, float] = field(default_factory=dict)  # run -> its logical date's timestamp
    dag_of: dict[int, str] = field(default_factory=dict)  # run -> its DAG (filled with dates)
    filelocs: dict[str, str] = field(default_factory=dict)  # DAG -> its file in the DAGs folder
    pool_slots: dict[str, int] | None = None  # each pool's slots (None: read them)
    holding: set[str] = field(default_factory=set)  # DAGs paused with --stop-queued
    # run -> (its DAG, its logical date's timestamp, its prior success's (None: it has none), that prior success)
    prior: dict[int, tuple[str, float, float | None, prior_runs.PriorSuccess | None]] = field(default_factory=dict)
    active: dict[str, int] = field(default_factory=dict)  # DAG -> its task instances queued or running, at most
    active_mark: Any = None  # the job's quiet mark when `active` was read (None: read it)
    identity: DatabaseIdentity | None = None  # the database's (None: read it)

    def forget(self) -> None:
        """After another process wrote or a transaction failed (a rolled-back run's id may come back with
        another date)."""
        self.dates.clear()
        self.dag_of.clear()
        self.pool_slots = None
        self.prior.clear()
        self.active.clear()
        self.active_mark = None

    def active_counts(self, session: Session, candidates: Iterable[tuple[task_store.TiRow, DagRun, Any]], *,
                      slots: int, dag_of: Mapping[int, str], mark: Any) -> Mapping[str, int]:
        """Each candidate's DAG's task instances queued or running, for planner.choose's max_active_tasks. While the
        job's quiet mark (`mark`; None: PostgreSQL, or a timeline locked) is the one they were read with, nobody
        else wrote since, and only the job's own queueing (`queued`) adds to them: what was read plus what it queued
        since is a bound. The bound is returned instead of a read when, for every candidate, it plus the open
        `slots` is within the candidate's limit: choose() refuses none for its DAG's limit either way, so it
        chooses the same."""
        limits: dict[str, int] = {}
        for dag_id, limit in {(dag_of[ti.run_id], spec.max_active_tasks) for ti, _run, spec in candidates}:
            limits[dag_id] = min(limits.get(dag_id, limit), limit)
        kept = self.active
        if mark is not None and mark == self.active_mark and all(
                dag_id in kept and kept[dag_id] + slots <= limit for dag_id, limit in limits.items()):
            return kept
        counts = task_store.active_counts_by_dag(session, list(limits), lock=True)  # (it queues next)
        if mark is None or mark != self.active_mark:
            kept.clear()
        self.active_mark = mark
        kept.update((dag_id, counts.get(dag_id, 0)) for dag_id in limits)
        return counts

    def queued(self, dag_ids: Iterable[str]) -> None:
        """The job queued a try of each of these DAGs' task instances (in the transaction under way: should it fail,
        the job's quiet mark changes, and the counts are read again)."""
        for dag_id in dag_ids:
            if dag_id in self.active:
                self.active[dag_id] += 1

    def active_differences(self, session: Session, mark: Any) -> list[str]:
        """Verify mode: where a kept bound of a DAG's task instances queued or running is below what the database
        says (while the quiet mark it was read with holds)."""
        if mark is None or mark != self.active_mark or not self.active:
            return []
        found = task_store.active_counts_by_dag(session, list(self.active))
        return [f"DAG {dag_id}: remembered at most {n} task instances queued or running, the database says "
                f"{found.get(dag_id, 0)}" for dag_id, n in self.active.items() if found.get(dag_id, 0) > n]

    def passed_values(self, session: Session, run_ids: set[int]) -> dict[int, dict[str, dict[str, Any]]]:
        """The values each run's tasks passed on: read once per held run, then kept up to date (`pushed`)."""
        missing = {i for i in run_ids if i not in self.values}  # (not a set of every kept run's id, every loop)
        if missing:
            self.values.update(xcom_store.values_for_runs(session, missing))
        return {i: self.values[i] for i in run_ids}

    def pushed(self, run_id: int, label: str, values: Iterable[tuple[str, Any]]) -> None:
        """A try of the held run pushed values, recorded in this transaction."""
        if run_id in self.values:
            self.values[run_id].setdefault(label, {}).update(dict(values))

    def let_go(self, run_ids: Iterable[int]) -> None:
        """Runs finished, or were just claimed (another job may have held them meanwhile): their values are read
        again when needed."""
        for run_id in run_ids:
            self.values.pop(run_id, None)
            self.prior.pop(run_id, None)
        if len(self.intervals) > _MANY:
            self.intervals.clear()

    def remember_intervals(self, runs: Iterable[DagRun]) -> None:
        """The runs' data intervals, for the next runs' prev_data_interval_* (a run's interval never changes)."""
        for r in runs:
            self.intervals[r.id] = (r.data_interval_start.isoformat(), r.data_interval_end.isoformat())

    def run_intervals(self, session: Session, run_ids: set[int]) -> dict[int, tuple[str, str]]:
        missing = {i for i in run_ids if i not in self.intervals}
        if missing:
            self.intervals.update(loop_store.intervals(session, missing))
        return {i: self.intervals[i] for i in run_ids if i in self.intervals}

    def dates_of(self, candidates: Iterable[tuple[task_store.TiRow, DagRun, Any]]
                 ) -> tuple[Mapping[int, float], Mapping[int, str]]:
        """Each candidate's run's logical date (a timestamp) and DAG, by run id: read from the run once per run (the
        loop goes over every waiting candidate each time it queues; a run's attributes cost more than a row's)."""
        if len(self.dates) > _MANY:
            self.dates.clear()
            self.dag_of.clear()
        for ti, run, _spec in candidates:
            if ti.run_id not in self.dates:
                self.dates[run.id], self.dag_of[run.id] = run.logical_date.timestamp(), run.dag_id
        return self.dates, self.dag_of

    def prior_successes(self, session: Session, runs: Iterable[DagRun]) -> dict[int, prior_runs.PriorSuccess]:
        """Each run's prior successful run (`prev_*_success`), for the runs that have one: read once per run, in
        one statement for those not kept."""
        runs = list(runs)
        missing = {r.id: r for r in runs if r.id not in self.prior}
        if missing:
            found = prior_runs.dated_prior_successes(session, missing)
            for run_id, run in missing.items():
                date, prior = found.get(run_id, (None, None))
                self.prior[run_id] = (run.dag_id, run.logical_date.timestamp(), date, prior)
        return {r.id: kept for r in runs if (kept := self.prior[r.id][3]) is not None}

    def succeeded(self, run: DagRun) -> None:
        """A run of this job succeeded (in the transaction under way; its `ended_at` set): it becomes the prior
        success of each later run of its DAG kept here whose prior success is older, or that had none."""
        date = run.logical_date.timestamp()
        prior: prior_runs.PriorSuccess | None = None
        for run_id, (dag_id, at, prior_date, _kept) in self.prior.items():
            if dag_id == run.dag_id and at > date and (prior_date is None or prior_date < date):
                prior = prior or prior_runs.as_prior_success(run.data_interval_start, run.data_interval_end,
                                                             run.started_at, run.ended_at)
                self.prior[run_id] = (dag_id, at, date, prior)

    def prior_differences(self, session: Session) -> list[str]:
        """Verify mode (scheduler/loop/memory.py): where a kept prior success differs from what the database says."""
        if not self.prior:
            return []
        found = prior_runs.prior_successes(session, list(self.prior))
        return [f"run {run_id}: remembered prior success {kept[3]}, the database says {found.get(run_id)}"
                for run_id, kept in self.prior.items() if found.get(run_id) != kept[3]]

    def date_differences(self, session: Session) -> list[str]:
        """Verify mode: where a kept logical date or DAG (`dates_of`) differs from what the database says."""
        if not self.dates:
            return []
        found = loop_store.dates_and_dags(session, self.dates)
        return [f"run {run_id}: remembered date {date} of DAG {self.dag_of.get(run_id)}, the database says "
                f"{found.get(run_id)}" for run_id, date in self.dates.items()
                if found.get(run_id) != (date, self.dag_of.get(run_id))]

    def dag_file(self, session: Session, dag_id: str) -> str:
        found = self.filelocs.get(dag_id)
        if found is None:
            found = self.filelocs[dag_id] = loop_store.dag_fileloc(session, dag_id)
        return found

    def database(self, session: Session, ti_id: int) -> str:
        """What the task id of a try of task instance `ti_id` carries of the database's identity."""
        return self.identity_of(session).of(ti_id)

    def identity_of(self, session: Session) -> DatabaseIdentity:
        """The database's identity (read once: it never changes)."""
        if self.identity is None:
            self.identity = identity_store.read(session)
        return self.identity

    def pools(self, session: Session, *, read: bool = False) -> dict[str, int]:
        """Each pool's slots (`read`: read them again in this transaction)."""
        if read or self.pool_slots is None:
            self.pool_slots = task_store.pool_slots(session)
        return self.pool_slots

    def dags_holding(self, session: Session, dag_ids: set[str]) -> set[str]:
        """Which of the DAGs are paused with --stop-queued (read again every poll_interval)."""
        if self.holding_cadence.due():
            self.holding = loop_store.dags_holding_queued(session, None)
            self.holding_cadence.done()
        return self.holding & dag_ids
