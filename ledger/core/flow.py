"""Control flow between tasks, as Airflow has it: branching, short-circuits, setup and teardown tasks. Pure: a
version's spec, task states and the values tasks passed on in, decisions out; no database, no clock.

* **Branching.** A branch task (BranchPythonTask, `@task.branch`, the datetime and weekday branches) returns the
  task id(s) to follow; its try records them under the value key `skipmixin_key` as `{"followed": [...]}`
  (Airflow's key). Every task directly downstream of it that is neither followed nor downstream of a followed
  task is skipped (Airflow's `skip_all_except`: a join that a followed task also leads to stays); the skip then
  spreads by trigger rules (a task whose upstream was skipped is skipped under `all_success`, runs under
  `none_failed_min_one_success`, ...).
* **Short-circuit.** A short-circuit task whose condition is falsy records `{"skipped": [...]}`: with
  `ignore_downstream_trigger_rules` (the default) every task downstream of it, else only its direct downstream
  tasks (the trigger rules decide the rest). Teardown tasks are never skipped this way.
* **Setup and teardown.** A teardown task runs once its upstream tasks are done if a setup task upstream of it
  succeeded (skipped when they were all skipped, upstream_failed when none succeeded): `all_done_setup_success`.
  The run's state comes from its effective leaves: teardown tasks do not count (unless `on_failure_fail_dagrun`),
  nor tasks whose only downstream tasks are such teardowns. Clearing a task clears its setups and their
  teardowns; marking a run success or failed leaves its unfinished teardowns to run.

The choices are read from the values, not from task states, so a cleared downstream task is skipped again while
its branch's choice stands (Airflow's NotPreviouslySkippedDep), and a branch run again decides again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ledger.core.mapping import split_label
from ledger.core.states import FINISHED_TASK_STATES, TaskState
from ledger.core.versions import reachable

if TYPE_CHECKING:
    from ledger.core.versions import DagSpec

FLOW_KEY = "skipmixin_key"  # Airflow's XCom key for what a branch followed or a short-circuit skipped
FOLLOWED, SKIPPED = "followed", "skipped"
BRANCH, SHORT_CIRCUIT = "branch", "short_circuit"
TEARDOWN_RULE = "all_done_setup_success"

S = TaskState


class BranchError(ValueError):
    """A branch returned something that is not a task (or task group) of its DAG."""


def branch_targets(returned: Any, task_ids: Iterable[str], groups: Mapping[str, Iterable[str]]) -> list[str]:
    """The task ids a branch's return value names: None (follow nothing), a task id, or a list of them; a task
    group's id stands for the group's root tasks, as in Airflow. BranchError for anything else."""
    if returned is None:
        names: list[Any] = []
    elif isinstance(returned, str):
        names = [returned]
    elif isinstance(returned, (list, tuple, set, frozenset)):
        names = sorted(returned, key=str) if isinstance(returned, (set, frozenset)) else list(returned)
    else:
        raise BranchError(f"a branch returns a task id, a list of task ids or None, not {type(returned).__name__} "
                          f"({returned!r:.60})")
    known = set(task_ids)
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise BranchError(f"a branch returns task ids (strings), not {name!r:.60}")
        found = [name] if name in known else sorted(groups.get(name, ()))
        if not found:
            raise BranchError(f"branch returned {name!r}, which is not a task or task group of this DAG")
        out.extend(t for t in found if t not in out)
    return out


def short_circuit_skips(downstream: Mapping[str, Iterable[str]], teardowns: Iterable[str], task_id: str, *,
                        ignore_downstream_trigger_rules: bool) -> list[str]:
    """What a short-circuit task whose condition is falsy skips (`downstream`: task id -> its direct downstream
    task ids): everything downstream of it, ignoring their trigger rules, or only its direct downstream tasks;
    never a teardown task."""
    chosen = set(downstream[task_id])
    if ignore_downstream_trigger_rules:
        chosen = reachable(downstream, chosen)
    return sorted(chosen - set(teardowns))


def branch_skips(spec: DagSpec, task_id: str, followed: Iterable[str]) -> list[str]:
    """The direct downstream tasks of branch `task_id` it skips when it follows `followed`: those neither followed
    nor downstream of a followed task (a join that a followed path reaches is kept)."""
    kept = spec.and_downstream(followed)
    return sorted(t for t in spec.downstream()[task_id] if t not in kept)


def flow_skips(spec: DagSpec, states: Mapping[str, TaskState],
               values: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Task id -> why it is skipped, from the choices of the branch and short-circuit tasks of a run that
    succeeded (`values`: label -> key -> value, what the run's tasks passed on)."""
    out: dict[str, str] = {}
    for tid, task in spec.tasks.items():
        if task.flow is None or states.get(tid) != S.SUCCESS:
            continue
        recorded = values.get(tid, {}).get(FLOW_KEY)
        if not isinstance(recorded, dict):
            continue
        if isinstance(recorded.get(FOLLOWED), list):
            followed = [t for t in recorded[FOLLOWED] if t in spec.tasks]
            why = f"branch {tid} followed {', '.join(followed) or 'nothing'}"
            for skipped in branch_skips(spec, tid, followed):
                out.setdefault(skipped, why)
        elif isinstance(recorded.get(SKIPPED), list):
            why = f"short-circuit {tid}: its condition was falsy"
            for skipped in recorded[SKIPPED]:
                if skipped in spec.tasks:
                    out.setdefault(skipped, why)
    return out


def teardown_outcome(upstream: list[TaskState], setups: list[TaskState]) -> TaskState | None:
    """`all_done_setup_success`: None until every upstream task is done; then SCHEDULED (run) when a setup
    upstream succeeded (or it has none), SKIPPED when every setup was skipped, else UPSTREAM_FAILED."""
    if not all(s in FINISHED_TASK_STATES for s in upstream):
        return None
    if not setups or any(s == S.SUCCESS for s in setups):
        return S.SCHEDULED
    return S.SKIPPED if all(s == S.SKIPPED for s in setups) else S.UPSTREAM_FAILED


def effective_leaves(spec: DagSpec) -> list[str]:
    """The tasks whose states make the run's state: tasks all of whose downstream tasks are teardowns that do not
    fail the run, and that are not such teardowns themselves (Airflow's leaves for the DAG run state)."""
    down = spec.downstream()

    def ignorable(tid: str) -> bool:
        task = spec.tasks[tid]
        return task.teardown and not task.fail_dagrun

    return [tid for tid in spec.tasks if not ignorable(tid) and all(ignorable(d) for d in down[tid])]


def teardowns_left_to_run(spec: DagSpec, states: Mapping[str, TaskState], marked: TaskState) -> set[str]:
    """The teardown tasks an operator marking a run `marked` (success or failed) leaves to run, as Airflow leaves
    them (they clean up what the setups made), given the run's task instance states (label -> state): its
    unfinished teardowns, when the run's state that its effective leaves will then give is the marked one
    (decision 30); none otherwise, and the mark ends the run at once."""
    unfinished = {key for key, st in states.items() if st not in FINISHED_TASK_STATES}
    left = {key for key in unfinished if spec.tasks[split_label(key)[0]].teardown}
    leaves = set(effective_leaves(spec))
    after = [marked if key in unfinished else st for key, st in states.items()
             if key not in left and split_label(key)[0] in leaves]
    succeeds = all(st in (S.SUCCESS, S.SKIPPED) for st in after)
    if not left or succeeds != (marked == S.SUCCESS):
        return set()
    return {split_label(key)[0] for key in left}


def with_setups_and_teardowns(spec: DagSpec, chosen: Iterable[str]) -> set[str]:
    """The tasks to clear with `chosen`: each chosen task's setups upstream of it whose teardowns are downstream of
    it (or that have no teardown), and those setups' teardowns; as Airflow clears them."""
    out = set(chosen)
    down = spec.downstream()
    upstream_of = _upstream_closure(spec)
    for tid in list(out):
        if spec.tasks[tid].setup or spec.tasks[tid].teardown:
            continue
        below = spec.and_downstream([tid])
        for setup in upstream_of[tid]:
            if not spec.tasks[setup].setup:
                continue
            teardowns = [d for d in down[setup] if spec.tasks[d].teardown]
            if not teardowns or any(t in below for t in teardowns):
                out.add(setup)
                out.update(teardowns)
    for tid in list(out):  # a chosen setup brings its teardowns
        if spec.tasks[tid].setup:
            out.update(d for d in down[tid] if spec.tasks[d].teardown)
    return out


def _upstream_closure(spec: DagSpec) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}

    def visit(tid: str) -> set[str]:
        if tid not in found:
            found[tid] = set()
            for up in spec.tasks[tid].upstream:
                found[tid] |= {up} | visit(up)
        return found[tid]

    for tid in spec.tasks:
        visit(tid)
    return found
