"""The local test loop: run one task, or a whole DAG, from the DAG file as it is now in the DAGs folder, in
the foreground, with the context and environment the scheduler gives a try; records nothing.

`ledger tasks test` and `ledger dags test` use it. The tries run exactly as a SequentialExecutor runs them
for the scheduler (a forked child, the execution timeout, Spark tasks in this process), with their log
in a temporary folder that is printed and then removed. The database is not opened.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pendulum

from ledger.core.dependencies import TiState, decide
from ledger.core.errors import DagNotFound, InvalidInput
from ledger.core.mapping import expand_task, label, max_map_length, split_label
from ledger.core.states import RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.executors.sequential import SequentialExecutor
from ledger.scheduler.runtime.dagbag import list_dag_files, load_file
from ledger.scheduler.runtime.try_item import RunGives, work_item
from ledger.scheduler.runtime.try_outcome import NO_RETRY_PREFIX
from ledger.scheduler.runtime.try_report import TryReport
from ledger.sdk.dag import DAG
from ledger.sdk.datasets import given_inlets, inlet_event, newest_events, outlet_event_rows
from ledger.sdk.describe import read_spec, version_of
from ledger.sdk.sensors import SENSOR_KEY, reschedule_at
from ledger.sdk.xcom import pull_view

TEST_RUN_TYPE = "test"


def find_dag(folder: Path, dag_id: str) -> DAG:
    """The DAG as the DAGs folder defines it now (files imported in this process, helpers beside them)."""
    errors = []
    for fileloc in list_dag_files(folder):
        loaded = load_file(fileloc, str(folder))
        if loaded.error:
            errors.append(loaded.error.strip().splitlines()[-1])
        for dag in loaded.dags:
            if dag.dag_id == dag_id:
                return dag
    if errors:
        raise InvalidInput(f"no DAG named {dag_id!r} in {folder}; files that failed to import: "
                           + "; ".join(errors))
    raise DagNotFound(dag_id)


@dataclass
class TestRun:
    """What a test run is about: the DAG, its spec (from the DAG as it is now), the interval, the conf; and what
    its tries left so far, kept in memory: the values they passed on, their rendered templates and the dataset
    events they made (which the later tries' inlets read, as the scheduler's read the database's)."""

    dag: DAG
    spec: DagSpec
    gives: RunGives  # what the run gives each try: built into a work item by the scheduler's own builder
    xcom: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> what its tries passed on so far
    rendered: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> its last try's rendered fields
    events: list[dict[str, Any]] = field(default_factory=list)  # the dataset events of its tries, oldest first

    @classmethod
    def of(cls, dag: DAG, at: datetime, conf: dict[str, Any] | None, folder: Path) -> TestRun:
        version, text = version_of(dag)
        interval = dag.schedule.interval_for(pendulum.instance(at))
        spec = read_spec(version, text)
        assert dag.fileloc is not None
        # the DAGs folder is the code root: helper modules resolve from it, as for the scheduler
        gives = RunGives(run_id=0, dag_id=dag.dag_id, logical_date=interval.logical_date,
                         data_interval_start=interval.start, data_interval_end=interval.end,
                         dag_version=spec.version_hash, run_type=TEST_RUN_TYPE, fileloc=dag.fileloc,
                         code_root=str(folder), conf=dict(conf or {}))
        return cls(dag, spec, gives)

    def item(self, key: str, try_number: int, logs: Path, ti_id: int) -> WorkItem:
        """The work item of one try of task instance `key` (a task id, or `task[i]`)."""
        task_id, map_index = split_label(key)
        task = self.spec.tasks[task_id]
        inlets = given_inlets(task.inlets, self.gives.data_interval_start, self.gives.data_interval_end,
                              self._read_inlet) if task.inlets else None
        return work_item(self.gives, task, ti_id=ti_id, try_number=try_number, map_index=map_index,
                         log_path=str(logs / f"{key}.try_{try_number}.log"), xcom=pull_view(self.xcom),
                         inlet_events=inlets)

    def _read_inlet(self, leaf: str, partitions: list[str] | None) -> list[dict[str, Any]]:
        return [dict(e) for e in newest_events(self.events, leaf, partitions)]

    def keep(self, item: WorkItem, state: str, left: TryReport) -> list[dict[str, Any]]:
        """Keep what a try left (values, rendered fields, and a successful try's dataset events, as the scheduler
        records them); the events it made."""
        key = label(item.task_id, item.map_index)
        for name, value in left.pushed:
            self.xcom.setdefault(key, {})[name] = value
        if left.rendered is not None:
            self.rendered[key] = left.rendered
        if state != TaskState.SUCCESS.value:
            return []
        made = [inlet_event(event_id=len(self.events) + i + 1, dataset=row["dataset"], partition=row["partition"],
                            alias=row["alias"], extra=row["extra"], dag_id=item.dag_id, run_id=item.run_id,
                            task_id=item.task_id, created_at=datetime.now(UTC))
                for i, row in enumerate(outlet_event_rows(self.spec.tasks[item.task_id].outlets, left.writes,
                                                          left.outlets, item.data_interval_start,
                                                          item.data_interval_end))]
        self.events += made
        return made


@contextmanager
def _executor() -> Iterator[SequentialExecutor]:
    executor = SequentialExecutor()
    executor.start()
    try:
        yield executor
    finally:
        executor.end(0)


def run_one(executor: SequentialExecutor, item: WorkItem, run: TestRun) -> tuple[str, str | None, str,
                                                                          list[dict[str, Any]]]:
    """Run one try to its end: (state, reason, its log, the dataset events it made). What it left is kept in `run`
    (in memory)."""
    executor.submit(item)
    finished = [e for e in executor.drain() if e.kind == "finished"]
    state, reason = (finished[-1].state or "failed", finished[-1].reason) if finished else ("failed", "no outcome")
    report = finished[-1].report if finished else None  # what the try left, read and removed where it ran
    made = run.keep(item, state, report if report is not None else TryReport(state))
    log = Path(item.log_path)
    return state, reason, log.read_text(errors="replace") if log.exists() else "", made


def test_task(run: TestRun, task_id: str, say: Callable[[str], None]) -> str:
    """One try of one task; its log is passed to `say` as it was written. Returns its state."""
    if task_id not in run.spec.tasks:
        raise InvalidInput(f"DAG {run.dag.dag_id!r} has no task {task_id!r}; it has: "
                           f"{', '.join(sorted(run.spec.tasks))}")
    if run.spec.tasks[task_id].mapped:
        raise InvalidInput(f"task {task_id!r} is mapped: its instances get their values from the run; "
                           f"`ledger dags test {run.dag.dag_id}` runs them")
    with tempfile.TemporaryDirectory(prefix="ledger-test-") as tmp, _executor() as executor:
        state, _reason, log, _made = run_one(executor, run.item(task_id, 1, Path(tmp), 1), run)
    say(log.rstrip("\n"))
    return state


def test_dag(run: TestRun, say: Callable[[str], None]) -> RunState:
    """Every task of the DAG in dependency order, by the real rules (trigger rules, retries), one try at a time.
    Retries run at once: a test does not wait out retry_delay."""
    spec = run.spec
    states = {key: TiState(TaskState.SCHEDULED) for t in spec.tasks.values()
              for key in ([label(t.task_id, i) for i in range(t.literal_count)] if t.literal_count else [t.task_id])}
    tries: dict[str, int] = {}
    rescheduled: dict[str, int] = {}  # label -> its tries that asked for a later check (they spend no retry)
    ids: dict[str, int] = {}  # label -> a task instance id of its own, for the executor
    with tempfile.TemporaryDirectory(prefix="ledger-test-") as tmp, _executor() as executor:
        while True:
            decision = decide(spec, states, None, now=datetime.now(UTC), values=run.xcom)
            for key, st in decision.mark.items():
                states[key] = TiState(st)
                why = decision.reasons.get(key) or f"trigger rule {spec.tasks[split_label(key)[0]].trigger_rule}"
                say(f"--- {key}: {st.value} ({why})")
            for tid in decision.expand:
                found = expand_task(spec.tasks[tid].expand, pull_view(run.xcom), max_length=max_map_length())
                del states[tid]
                if found.state is None:
                    states.update((label(tid, i), TiState(TaskState.SCHEDULED)) for i in range(found.count))
                else:
                    states[tid] = TiState(TaskState(found.state))
                say(f"--- {tid}: " + (f"expanded into {found.count} instance(s)" if found.state is None
                                      else f"{found.state} ({found.reason})"))
            if decision.run_state is not None:
                return decision.run_state
            if not decision.ready:
                if decision.mark or decision.expand:
                    continue
                if decision.retry_at is not None:  # a sensor's next check: waited for, unlike a retry's delay
                    time.sleep(max(0.0, (decision.retry_at - datetime.now(UTC)).total_seconds()))
                    continue
                return RunState.FAILED  # nothing can run: waiting on signals
            for key in decision.ready:
                tries[key] = tries.get(key, 0) + 1
                item = run.item(key, tries[key], Path(tmp), ids.setdefault(key, len(ids) + 1))
                state, reason, log, made = run_one(executor, item, run)
                retry = state == "failed" and tries[key] - rescheduled.get(key, 0) <= \
                    spec.tasks[split_label(key)[0]].retries and not (reason or "").startswith(NO_RETRY_PREFIX)
                shown = "up_for_retry" if retry else state
                say(f"--- {key} try {tries[key]}: {shown}" + (f" ({reason})" if reason else ""))
                say(log.rstrip("\n"))
                for event in made:
                    say(f"[ledger] {key} made a dataset event of {event['dataset']}"  # ("--- " starts state lines)
                        + (f" partition {event['partition']}" if event["partition"] else "")
                        + (f" (alias {event['alias']})" if event["alias"] else ""))
                if state == TaskState.UP_FOR_RESCHEDULE.value:  # spends no retry
                    rescheduled[key] = rescheduled.get(key, 0) + 1
                    at = reschedule_at(run.xcom.get(key, {}).get(SENSOR_KEY))
                    states[key] = TiState(TaskState.UP_FOR_RESCHEDULE, at)
                    continue
                states[key] = TiState(TaskState.UP_FOR_RETRY if retry else TaskState(state))
