"""What a task instance's mark covers (ledger.services.operations.mark_targets), as pure rules: the instance itself,
with
Airflow's options downstream and upstream, one mapped instance by its label; instances already in the state and
removed mapped ones left out; bad input refused. No database: task instances as unsaved rows."""

from __future__ import annotations

import pendulum
import pytest

from ledger import DAG, BashTask
from ledger.core.errors import InvalidInput
from ledger.core.states import TaskState
from ledger.core.versions import DagSpec
from ledger.models import TaskInstance
from ledger.sdk.describe import read_spec, version_of
from ledger.services.operations import mark_targets

S = TaskState


def chain() -> DagSpec:
    """a >> b >> c, a >> side; fan mapped over two commands after c."""
    with DAG("m", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
        a, b, c = BashTask("a", "true"), BashTask("b", "true"), BashTask("c", "true")
        fan = BashTask.partial(task_id="fan").expand(bash_command=["echo 1", "echo 2"])
        a >> b >> c >> fan
        a >> BashTask("side", "true")
    return read_spec(*version_of(dag))


def tis(**states: S) -> list[TaskInstance]:
    out = []
    for key, state in states.items():
        task_id, _, index = key.partition("_")
        out.append(TaskInstance(run_id=1, task_id=task_id, map_index=int(index) if index else -1, state=state.value))
    return out


RUN = tis(a=S.SUCCESS, b=S.FAILED, c=S.UPSTREAM_FAILED, side=S.SUCCESS, fan_0=S.UPSTREAM_FAILED,
          fan_1=S.UPSTREAM_FAILED, fan_2=S.REMOVED)


def marked(picked: list[str], state: S, *, downstream: bool = False, upstream: bool = False) -> list[str]:
    _chosen, targets = mark_targets(chain(), RUN, picked, state, downstream=downstream, upstream=upstream)
    return sorted(f"{t.task_id}[{t.map_index}]" if t.map_index >= 0 else t.task_id for t in targets)


def test_marking_one_task_instance_sets_only_it() -> None:
    assert marked(["b"], S.SUCCESS) == ["b"]


def test_downstream_takes_every_task_after_it_but_not_removed_mapped_instances() -> None:
    assert marked(["b"], S.SUCCESS, downstream=True) == ["b", "c", "fan[0]", "fan[1]"]


def test_upstream_takes_the_tasks_before_it_that_are_not_in_the_state_already() -> None:
    assert marked(["c"], S.SUCCESS, upstream=True) == ["b", "c"]
    assert marked(["c"], S.FAILED, upstream=True) == ["a", "c"]


def test_one_mapped_instance_is_picked_by_its_label() -> None:
    assert marked(["fan[1]"], S.SUCCESS) == ["fan[1]"]
    assert marked(["fan"], S.SUCCESS) == ["fan[0]", "fan[1]"]


@pytest.mark.parametrize(("picked", "state", "message"), [
    (["zzz"], S.SUCCESS, "task 'zzz' is not in version"),
    (["fan[7]"], S.SUCCESS, "no task instance fan[7] in this run"),
    (["a"], S.RUNNING, "--state must be success, failed or skipped"),
])
def test_bad_marks_are_refused_with_the_reason(picked: list[str], state: S, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[")):
        marked(picked, state)
