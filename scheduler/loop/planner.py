"""The decisions of one scheduler loop, pure: no I/O, no clock, no database.

The job (scheduler/loop/job.py) gathers a snapshot of the runs it holds (their task instances, their version's
spec, the states of their previous runs for depends_on_past) and the capacity it has (open executor slots,
running task instances per DAG, pool room, running runs per DAG); these functions say what to do:

* `plan_runs`: which queued runs start (within max_active_runs), which task instances are marked (skipped,
  upstream_failed...) by the rules of ledger.core.dependencies, which runs finish and how, which task instances
  are ready, and when the earliest retry comes due;
* `choose`: which ready task instances get a slot now (parallelism, max_active_tasks, pools, the tasks'
  max_active_tis_per_dag and max_active_tis_per_dagrun), highest
  priority first, then oldest logical date (newest first for backwards backfills).

The job applies the plan in its transaction. Property tests drive these functions directly
(tests/scheduler/test_planner.py).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.dependencies import PreviousRun, TiState, decide, has_flow
from ledger.core.states import ACTIVE_TASK_STATES, FINISHED_TASK_STATES, RunState, TaskState
from ledger.core.versions import DagSpec

if TYPE_CHECKING:
    from ledger.store.tasks import TiRow


class RunLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def logical_date(self) -> datetime: ...
    @property
    def previous_run_id(self) -> int | None: ...
    @property
    def backfill_id(self) -> int | None: ...


Candidate = tuple["TiRow", Any, DagSpec]  # (task instance, its run: a RunLike, the run's version's spec)


@dataclass(frozen=True)
class HeldRun:
    """One run the job holds, as the planner sees it."""

    run: Any  # RunLike (an ORM DagRun in the job; anything with those attributes in tests)
    spec: DagSpec
    tis: dict[str, TiRow]  # the job updates its pictures' dicts in place as it writes (the planner only reads)
    previous: PreviousRun | None = None  # states of the previous run's task instances (depends_on_past)
    backfill_cancelled: bool = False
    held_queued: bool = False  # its DAG was paused with --stop-queued: a queued run does not start


@dataclass
class RunsPlan:
    start: list[Any] = field(default_factory=list)  # queued runs that become running
    mark: list[tuple[TiRow, TaskState, Any]] = field(default_factory=list)  # (ti, new state, run)
    finish: list[tuple[Any, RunState, str | None]] = field(default_factory=list)  # (run, end state, reason)
    ready: list[Candidate] = field(default_factory=list)
    expand: list[Candidate] = field(default_factory=list)  # mapped tasks to expand now (ledger/core/mapping.py)
    settled: dict[int, list[Candidate]] = field(default_factory=dict)  # run id -> its ready ones (stable)
    successors: dict[int, int] = field(default_factory=dict)  # previous run id -> held run that depends on it
    retry_at: datetime | None = None  # the earliest time something comes due after now (a retry, a timeout)
    timed_out: list[Any] = field(default_factory=list)  # running runs past their DAG's dagrun_timeout
    deadline_missed: list[Any] = field(default_factory=list)  # unfinished runs past their deadline (once)
    waiting_on_past: set[int] = field(default_factory=set)  # runs with a task waiting on their previous run
    why: dict[int, str] = field(default_factory=dict)  # ti id -> why it is marked, when not by its trigger rule

    def wake_at(self, when: datetime) -> None:
        if self.retry_at is None or when < self.retry_at:
            self.retry_at = when


def states_of(tis: Mapping[str, TiRow]) -> dict[str, TiState]:
    return {tid: TiState(r.state, r.next_try_at, r.armed) for tid, r in tis.items()}


def run_order(run: Any, newest_first: bool) -> tuple[float, int]:
    sign = -1 if newest_first else 1
    return sign * run.logical_date.timestamp(), sign * run.id


def plan_runs(held: Sequence[HeldRun], running: Mapping[str, int], *, now: datetime,
              newest_first: bool = False,
              values: Callable[[int], Mapping[str, Mapping[str, Any]]] | None = None,
              backfill_room: Mapping[int, int] | None = None) -> RunsPlan:
    """What to do with the held runs. `running`: runs of each DAG in state running now (all jobs'). `values`: the
    values a run's tasks passed on, by run id, asked only for runs with branch or short-circuit tasks.
    `backfill_room`: for each backfill given its own max_active_runs, how many more of its runs may be running
    (its limit less its runs running now, all jobs'); a queued run of it starts only within that room too."""
    plan = RunsPlan()
    running = dict(running)
    room = dict(backfill_room or {})
    for h in sorted(held, key=lambda h: run_order(h.run, newest_first)):
        run, spec = h.run, h.spec
        if h.backfill_cancelled:  # start nothing more; once its tries are done, skip what has not started
            if any(t.state in ACTIVE_TASK_STATES for t in h.tis.values()):
                continue
            waiting = [t for t in h.tis.values() if t.state not in FINISHED_TASK_STATES]
            if waiting:
                plan.mark.extend((t, TaskState.SKIPPED, run) for t in waiting)
                skipped = ", ".join(sorted(t.label for t in waiting))
                plan.finish.append((run, RunState.FAILED,
                                    f"backfill {run.backfill_id} cancelled; skipped {skipped} (run cancelled)"))
                continue
            # every task had finished before the cancel took effect: the run ends as its own rules say
            decided = decide(spec, states_of(h.tis), h.previous, now=now).run_state or RunState.FAILED
            plan.finish.append((run, decided, f"backfill {run.backfill_id} cancelled"))
            continue
        if run.state == RunState.QUEUED.value:
            if h.held_queued or running.get(run.dag_id, 0) >= spec.max_active_runs \
                    or room.get(run.backfill_id, 1) <= 0:
                continue
            running[run.dag_id] = running.get(run.dag_id, 0) + 1
            if run.backfill_id in room:
                room[run.backfill_id] -= 1
            plan.start.append(run)
        if run.previous_run_id is not None and any(t.depends_on_past for t in spec.tasks.values()):
            plan.successors[run.previous_run_id] = run.id  # its decisions read the previous run's states
        due = _due_times(h, plan, now)
        if run in plan.timed_out:
            continue
        passed = values(run.id) if values is not None and has_flow(spec) else None
        decision = decide(spec, states_of(h.tis), h.previous, now=now, values=passed)
        plan.mark.extend((h.tis[tid], st, run) for tid, st in decision.mark.items())
        plan.why.update((h.tis[key].id, why) for key, why in decision.reasons.items())
        if decision.run_state is not None:
            plan.finish.append((run, decision.run_state, None))
            continue
        mine = [(h.tis[tid], run, spec) for tid in decision.ready]
        plan.ready.extend(mine)
        plan.expand.extend((h.tis[key], run, spec) for key in decision.expand)
        if not decision.mark and not decision.expand and decision.retry_at is None and not decision.waiting_on_past \
                and not due:
            plan.settled[run.id] = mine
        if decision.retry_at is not None:
            plan.wake_at(decision.retry_at)
        if decision.waiting_on_past:
            plan.waiting_on_past.add(run.id)
    return plan


def _due_times(h: HeldRun, plan: RunsPlan, now: datetime) -> bool:
    """The run's deadline and dagrun_timeout: passed ones go into the plan, coming ones set when to wake.
    True when one is still to come (the run is then decided again every loop, not settled)."""
    run, spec = h.run, h.spec
    limits = []
    if spec.deadline is not None and run.deadline_missed_at is None:
        limits.append((run.data_interval_end + timedelta(seconds=spec.deadline), plan.deadline_missed))
    if spec.dagrun_timeout is not None and run.state == RunState.RUNNING.value and run.started_at is not None:
        limits.append((run.started_at + timedelta(seconds=spec.dagrun_timeout), plan.timed_out))
    coming = False
    for at, passed in limits:
        if now >= at:
            passed.append(run)
        else:
            plan.wake_at(at)
            coming = True
    return coming


def choose(candidates: Iterable[Candidate], *, slots: int, active: Mapping[str, int],
           pool_room: Mapping[str, int], newest_first: bool = False,
           dates: Mapping[int, float] | None = None, dag_of: Mapping[int, str] | None = None,
           task_room: Mapping[tuple[str, str], int] | None = None,
           run_task_room: Mapping[tuple[int, str], int] | None = None,
           limited: Container[int] | None = None) -> list[Candidate]:
    """The candidates that get a slot now: highest priority_weight first, then by logical date (oldest first,
    or newest first), then task instance id; each within the open `slots`, its DAG's max_active_tasks
    (`active`: task instances of each DAG queued or running now) and its pool's room: its free slots, of which
    the instance takes its pool_slots (a pool missing from `pool_room` is not limited; an instance that needs more
    slots than are free waits, and one that needs fewer, after it, may take them, as in Airflow). `dates`: run id
    -> its logical date's timestamp, for every candidate's run, when the caller keeps them (a job sorts every
    candidate each loop: reading each run's date costs more), and `dag_of`: run id -> its DAG, likewise.
    `task_room`: (DAG, task) -> how many more of the task's instances may be queued (its max_active_tis_per_dag less
    those queued or running now); `run_task_room`: (run id, task) -> the
    same within one run (max_active_tis_per_dagrun); a task missing from them is not limited. `limited`: the ids of
    the candidates those limits hold back (their version declares them; None: every candidate of a task in them);
    any other candidate chosen still takes from its task's room, as it will be queued or running too."""
    if slots <= 0:
        return []
    sign = -1 if newest_first else 1
    if dates is None:
        ordered = sorted(candidates, key=lambda c: (-c[0].priority_weight, sign * c[1].logical_date.timestamp(),
                                                    c[0].id))
    else:
        ordered = sorted(candidates, key=lambda c: (-c[0].priority_weight, sign * dates[c[0].run_id], c[0].id))
    active = dict(active)
    room = dict(pool_room)
    # (None when no candidate's task is limited: the usual case costs one test per candidate)
    tasks_room = dict(task_room or {}) if task_room or run_task_room else None
    runs_room = dict(run_task_room or {})
    chosen: list[Candidate] = []
    for ti, run, spec in ordered:
        if len(chosen) >= slots:
            break
        dag_id = dag_of[ti.run_id] if dag_of is not None else run.dag_id
        if active.get(dag_id, 0) >= spec.max_active_tasks:
            continue
        if ti.pool in room and room[ti.pool] < ti.pool_slots:  # (a later one that takes fewer slots may fit)
            continue
        if tasks_room is not None:
            per_dag, per_run = (dag_id, ti.task_id), (ti.run_id, ti.task_id)
            if (limited is None or ti.id in limited) and (
                    tasks_room.get(per_dag, 1) <= 0 or runs_room.get(per_run, 1) <= 0):
                continue
            if per_dag in tasks_room:
                tasks_room[per_dag] -= 1
            if per_run in runs_room:
                runs_room[per_run] -= 1
        chosen.append((ti, run, spec))
        active[dag_id] = active.get(dag_id, 0) + 1
        if ti.pool in room:
            room[ti.pool] -= ti.pool_slots
    return chosen
