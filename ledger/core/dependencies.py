"""Which task instances of a run may start: trigger rules, depends_on_past along the chain, and the
run's own state. Pure: states in, a decision out; no database, no clock (`now` is an argument).
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.core.flow import TEARDOWN_RULE, effective_leaves, flow_skips, teardown_outcome
from ledger.core.mapping import split_label
from ledger.core.states import FINISHED_TASK_STATES, RunState, TaskState
from ledger.core.versions import DagSpec, TaskSpec

S = TaskState
OK_FOR_PAST = frozenset({S.SUCCESS, S.SKIPPED, S.STOPPED})
SUCCESS_LIKE = frozenset({S.SUCCESS, S.STOPPED})  # a task stopped by a signal ended as it was asked to
FAILED_LIKE = frozenset({S.FAILED, S.UPSTREAM_FAILED})


@dataclass(frozen=True, slots=True)
class TiState:
    state: TaskState
    next_try_at: datetime | None = None
    armed: bool = False  # a task that starts on signals got one (START/RESTART) and may start


@dataclass(frozen=True, slots=True)
class PreviousRun:
    """The run's `previous` in the chain: the states of its task instances (absent task = not in its version)."""

    states: Mapping[str, TaskState]


@dataclass
class Decision:
    ready: list[str] = field(default_factory=list)  # may be queued now
    mark: dict[str, TaskState] = field(default_factory=dict)  # skipped / upstream_failed by trigger rule
    waiting_on_past: list[str] = field(default_factory=list)  # blocked by depends_on_past / wait_for_downstream
    waiting_for_signal: list[str] = field(default_factory=list)  # start on signals and have not had one
    retry_at: datetime | None = None  # the earliest future retry, if any
    run_state: RunState | None = None  # success/failed once every task instance has finished
    # mapped tasks whose upstream is done and that wait as one unexpanded instance (map_index -1): expand now
    expand: list[str] = field(default_factory=list)
    # why a marked task instance was marked, when a rule other than its trigger rule decided (a branch's choice)
    reasons: dict[str, str] = field(default_factory=dict)


def trigger_rule_outcome(rule: str, upstream: list[TaskState]) -> TaskState | None:
    """What the trigger rule says given the upstream states: SCHEDULED (may run), SKIPPED,
    UPSTREAM_FAILED, or None (not decided yet: some upstream has not finished)."""
    if not upstream:
        return S.SCHEDULED
    done = all(s in FINISHED_TASK_STATES for s in upstream)
    success = sum(s in SUCCESS_LIKE for s in upstream)
    failed = sum(s in FAILED_LIKE for s in upstream)
    skipped = sum(s == S.SKIPPED for s in upstream)
    n = len(upstream)
    if rule == "all_success":
        if failed:
            return S.UPSTREAM_FAILED
        if skipped:
            return S.SKIPPED
        return S.SCHEDULED if success == n else None
    if rule == "all_done":
        return S.SCHEDULED if done else None
    if rule == "one_success":
        if success:
            return S.SCHEDULED
        if done:
            return S.UPSTREAM_FAILED if failed else S.SKIPPED
        return None
    if rule == "one_failed":
        if failed:
            return S.SCHEDULED
        return S.SKIPPED if done else None
    if rule == "none_failed":
        if failed:
            return S.UPSTREAM_FAILED
        return S.SCHEDULED if done else None
    if rule == "all_failed":
        if success or skipped:
            return S.SKIPPED
        return S.SCHEDULED if done else None
    if rule == "always":
        return S.SCHEDULED  # runs whatever its upstream does, without waiting for it
    if rule == "all_done_min_one_success":
        if not done:
            return None
        if success:
            return S.SCHEDULED
        return S.UPSTREAM_FAILED if failed else S.SKIPPED
    if rule == "all_skipped":
        if success or failed:
            return S.SKIPPED
        return S.SCHEDULED if done else None
    if rule == "one_done":
        if success or failed:
            return S.SCHEDULED
        return S.SKIPPED if done else None
    if rule == "none_failed_min_one_success":
        if failed:
            return S.UPSTREAM_FAILED
        if not done:
            return None
        return S.SCHEDULED if success else S.SKIPPED
    if rule == "none_skipped":
        if skipped:
            return S.SKIPPED
        return S.SCHEDULED if done else None
    raise ValueError(f"unknown trigger rule {rule!r}")


def past_allows(spec: DagSpec, task_id: str, previous: PreviousRun | None) -> bool:
    """depends_on_past along the chain: the same task in the previous run succeeded or was skipped
    (satisfied when there is no previous run or its version has no such task); wait_for_downstream
    also needs that task's immediate downstream tasks in the previous run to have done so."""
    task = spec.tasks[task_id]
    if not task.depends_on_past or previous is None:
        return True
    watched = {task_id, *(spec.downstream()[task_id] if task.wait_for_downstream else ())}
    # every instance of a mapped task counts (the keys are labels: `task[i]`)
    return all(state in OK_FOR_PAST for key, state in previous.states.items() if split_label(key)[0] in watched)


def ready_alone(spec: DagSpec, task_id: str, state: TiState) -> bool:
    """Whether this task instance is ready to be queued whatever the other task instances of its run are
    doing: scheduled (armed, if it starts on a signal), no upstream task, and no depends_on_past. The
    scheduler queues such a task instance in the transaction that armed it (a signal's START), without
    deciding the whole run first; `decide` would find it ready too."""
    task = spec.tasks.get(task_id)
    if task is None or state.state != S.SCHEDULED or state.next_try_at is not None:
        return False
    if task.starts_on_signal and not state.armed:
        return False
    return not task.upstream and not task.depends_on_past


def leaves(spec: DagSpec) -> list[str]:
    """The tasks whose states make the run's state: the leaves, where teardown tasks do not count
    (ledger/core/flow.py)."""
    found = _leaves_cache.get(spec.version_hash)
    if found is None:
        found = _leaves_cache[spec.version_hash] = effective_leaves(spec)
    return found


_leaves_cache: dict[str, list[str]] = {}
_flow_cache: dict[str, bool] = {}


def has_flow(spec: DagSpec) -> bool:
    """Whether a task of the version is a branch or a short-circuit (whose choices the run's values hold)."""
    found = _flow_cache.get(spec.version_hash)
    if found is None:
        found = _flow_cache[spec.version_hash] = any(t.flow is not None for t in spec.tasks.values())
    return found


def by_task(keys: Iterable[str]) -> dict[str, list[str]]:
    """Task id -> the labels of its task instances (one, or a mapped task's instances `task[i]`)."""
    out: dict[str, list[str]] = {}
    for key in keys:
        out.setdefault(split_label(key)[0], []).append(key)
    return out


def decide(spec: DagSpec, states: Mapping[str, TiState], previous: PreviousRun | None, *,
           now: datetime, values: Mapping[str, Mapping[str, Any]] | None = None) -> Decision:
    """The next step for one run, given its task instance states by label (the task id, or `task[i]` for instance
    i of a mapped task; tasks of the run's own version). A downstream task sees every instance of a mapped task as
    an upstream; a mapped task waiting unexpanded is to be expanded (`expand`) when its trigger rule lets it run.
    `values`: what the run's tasks passed on (label -> key -> value), where its branch and short-circuit tasks'
    choices are (ledger/core/flow.py); needed only when the version has such tasks."""
    decision = Decision()
    current = {key: st.state for key, st in states.items()}
    instances = by_task(states)
    skips = flow_skips(spec, current, values or {}) if has_flow(spec) else {}
    for tid in topological(spec):
        for key in instances.get(tid, ()):
            if tid in skips and states[key].state == S.SCHEDULED:
                decision.mark[key] = current[key] = S.SKIPPED
                decision.reasons[key] = skips[tid]
                continue
            _decide_one(spec, tid, key, states[key], current, instances, previous, now, decision)
    waiting = set(decision.waiting_for_signal)
    if waiting and all(s in FINISHED_TASK_STATES or key in waiting for key, s in current.items()):
        # everything else has ended and no signal came: the run ends, those tasks skipped
        for key in decision.waiting_for_signal:
            decision.mark[key] = current[key] = S.SKIPPED
        decision.waiting_for_signal.clear()
    if current and all(s in FINISHED_TASK_STATES for s in current.values()):
        ok = all(current[key] in OK_FOR_PAST for tid in leaves(spec) for key in instances.get(tid, ())
                 if current[key] != S.REMOVED)
        decision.run_state = RunState.SUCCESS if ok else RunState.FAILED
    elif not current:
        decision.run_state = RunState.SUCCESS
    return decision


def _decide_one(spec: DagSpec, tid: str, key: str, st: TiState, current: dict[str, TaskState],
                instances: Mapping[str, list[str]], previous: PreviousRun | None, now: datetime,
                decision: Decision) -> None:
    if st.state in (S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE):  # a retry, or a sensor's next check, when due
        if st.next_try_at is None or st.next_try_at <= now:
            if past_allows(spec, tid, previous):
                decision.ready.append(key)
            else:
                decision.waiting_on_past.append(key)
        elif decision.retry_at is None or st.next_try_at < decision.retry_at:
            decision.retry_at = st.next_try_at
        return
    if st.state != S.SCHEDULED:
        return
    task = spec.tasks[tid]
    if task.starts_on_signal and not st.armed:
        decision.waiting_for_signal.append(key)
        return
    # a removed instance (a mapped task re-expanded over a shorter list) is no upstream any more, as in Airflow
    found = (current.get(k, S.SUCCESS) for up in task.upstream for k in _upstream_keys(spec, task, key, up, instances))
    upstream: list[TaskState] = [state for state in found if state != S.REMOVED]
    if task.teardown or task.trigger_rule == TEARDOWN_RULE:
        setups = [current.get(k, S.SUCCESS) for up in task.upstream if spec.tasks[up].setup
                  for k in instances.get(up, [up])]
        outcome = teardown_outcome(upstream, setups)
    else:
        outcome = trigger_rule_outcome(task.trigger_rule, upstream)
    if outcome is None:
        return
    if outcome != S.SCHEDULED:
        decision.mark[key] = outcome
        current[key] = outcome
    elif task.mapped and key == tid:  # not expanded yet: its instances are made first
        decision.expand.append(key)
    elif past_allows(spec, tid, previous):
        decision.ready.append(key)
    else:
        decision.waiting_on_past.append(key)


def _upstream_keys(spec: DagSpec, task: TaskSpec, key: str, up: str, instances: Mapping[str, list[str]]) -> list[str]:
    """The task instances of upstream task `up` that instance `key` of `task` waits for: every one of them, but in
    a mapped task group an instance waits for the same instance of its siblings (and, not expanded yet, for the
    tasks outside the group only: its count comes from there), as in Airflow."""
    if task.mapped_group is None or spec.tasks[up].mapped_group != task.mapped_group:
        return instances.get(up, [up])
    _task_id, index = split_label(key)
    if index < 0:
        return []
    same = f"{up}[{index}]"
    found = instances.get(up, [up])
    return [same] if same in found else [k for k in found if k == up]


_topo_cache: dict[str, list[str]] = {}


def topological(spec: DagSpec) -> list[str]:
    """Task ids upstream-first (cached per version)."""
    found = _topo_cache.get(spec.version_hash)
    if found is None:
        sorter = graphlib.TopologicalSorter({tid: t.upstream for tid, t in spec.tasks.items()})
        sorter.prepare()
        found = []
        while sorter.is_active():  # level by level, each level sorted: the same order every time
            ready = sorted(sorter.get_ready())
            found.extend(ready)
            sorter.done(*ready)
        _topo_cache[spec.version_hash] = found
    return found
