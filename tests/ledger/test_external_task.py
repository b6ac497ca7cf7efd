"""ExternalTaskSensor's pure parts (ledger/sdk/external_task.py): which tasks a task group watches, and what their
states mean. No database."""

from __future__ import annotations

import pendulum
import pytest

from ledger import DAG
from ledger.core.errors import DagDefinitionError
from ledger.sdk.external_task import DONE, FAILED, WAIT, ExternalTaskSensor, external_outcome, group_members

TASKS = ["extract", "load.quick", "load.slow.table", "loader", "report.load"]


def test_a_group_watches_its_tasks_and_those_of_the_groups_inside_it() -> None:
    assert group_members(TASKS, "load") == ["load.quick", "load.slow.table"]  # not `loader`, nor `report.load`
    assert group_members(TASKS, "load.slow") == ["load.slow.table"]
    assert group_members(TASKS, "missing") == []


@pytest.mark.parametrize(("states", "outcome"), [
    pytest.param(["success", "running"], WAIT, id="one-still-running"),
    pytest.param(["success", "success"], DONE, id="all-succeeded"),
    pytest.param(["success", "failed"], FAILED, id="one-failed"),
    pytest.param([], WAIT, id="no-task-of-the-group-yet"),
])
def test_a_group_is_done_when_all_its_tasks_are_allowed_and_failed_when_one_failed(states: list[str],
                                                                                  outcome: str) -> None:
    assert external_outcome(states, allowed=["success"], failed=["failed"], skipped=[]) == outcome


def test_a_group_and_task_ids_together_are_refused_and_the_group_is_part_of_the_version() -> None:
    with DAG("waits", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
        with pytest.raises(DagDefinitionError, match="external_task_group_id or external_task_id"):
            ExternalTaskSensor("both", external_dag_id="other", external_task_id="a", external_task_group_id="g")
        sensor = ExternalTaskSensor("group", external_dag_id="other", external_task_group_id="load")
        plain = ExternalTaskSensor("plain", external_dag_id="other", external_task_id="a")
    assert sensor.definition()["external_task_group_id"] == "load"
    assert "external_task_group_id" not in plain.definition()  # versions made before keep their hash
