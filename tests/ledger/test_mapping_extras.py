"""Mapping extras, as Airflow's: expand_kwargs(), .map() and .zip() on a task's value; the rules, no database."""

from __future__ import annotations

import json
from typing import Any

import pendulum
import pytest

from ledger import DAG, BashTask, task
from ledger.core.dependencies import TiState, decide
from ledger.core.errors import DagDefinitionError
from ledger.core.mapping import KWARGS, expand_task, source_text
from ledger.core.states import TaskState
from ledger.sdk.describe import read_spec, structure_of
from ledger.sdk.mapped_groups import expand_group
from ledger.sdk.xcom import pull_view, resolve

START = pendulum.datetime(2024, 1, 1, tz="UTC")


def spec_of(dag: DAG, task_id: str) -> dict[str, Any]:
    return next(t for t in structure_of(dag)["tasks"] if t["task_id"] == task_id)


def double(x: int) -> int:
    return x * 2


def test_map_transforms_each_item_in_the_instance_and_keeps_the_count() -> None:
    with DAG("m", start_date=START) as dag:
        @task
        def numbers() -> list[int]:
            return [1, 2, 3]

        @task
        def show(x: int) -> int:
            return x

        show.expand(x=numbers().map(double))
    described = spec_of(dag, "show")["expand"]
    assert described[0][0] == "x" and described[0][1]["of"] == {"xcom_from": "numbers", "key": "return_value"}
    assert described[0][1]["map"]["callable"].endswith("double")
    assert dag.tasks["numbers"].downstream_ids == {"show"}
    passed = {"numbers": {"return_value": [1, 2, 3]}}
    assert expand_task(described, passed, max_length=10).count == 3
    assert [dag.tasks["show"].for_instance(i, passed).op_kwargs["x"] for i in range(3)] == [2, 4, 6]
    assert source_text(described) == "the value of task 'numbers'"


def test_a_map_function_that_fails_fails_its_instance_only_with_a_reason() -> None:
    def boom(x: int) -> int:
        return 10 // x

    with DAG("m", start_date=START) as dag:
        src = BashTask("src", "echo")
        BashTask.partial(task_id="b").expand(bash_command=src.map(boom).map(str))
    passed = {"src": {"return_value": [5, 0]}}
    assert dag.tasks["b"].for_instance(0, passed).bash_command == "2"
    with pytest.raises(ValueError, match=r"map\(\) function boom failed on item 1: ZeroDivisionError"):
        dag.tasks["b"].for_instance(1, passed)


def test_zip_pairs_items_by_index_shortest_or_with_a_fillvalue() -> None:
    with DAG("z", start_date=START) as dag:
        a, b = BashTask("a", "echo"), BashTask("b", "echo")

        @task
        def pair(x: Any) -> Any:
            return x

        pair.expand(x=a.output.zip(b))
        pair.override(task_id="longest").expand(x=a.zip(b.output, fillvalue=None))
    passed = {"a": {"return_value": [1, 2, 3]}, "b": {"return_value": ["x", "y"]}}
    shortest, longest = spec_of(dag, "pair")["expand"], spec_of(dag, "longest")["expand"]
    assert expand_task(shortest, passed, max_length=10).count == 2
    assert expand_task(longest, passed, max_length=10).count == 3
    assert dag.tasks["pair"].for_instance(1, passed).op_kwargs["x"] == (2, "y")
    assert dag.tasks["longest"].for_instance(2, passed).op_kwargs["x"] == (3, None)
    assert dag.tasks["pair"].upstream_ids == {"a", "b"}
    not_a_list = {"a": {"return_value": 7}, "b": {"return_value": [1]}}
    failed = expand_task(shortest, not_a_list, max_length=10)
    assert failed.state == "failed" and "not a list" in (failed.reason or "")


def test_expand_kwargs_makes_one_instance_per_dict_of_arguments() -> None:
    with DAG("k", start_date=START) as dag:
        @task
        def add(x: int, y: int, z: int = 0) -> int:
            return x + y + z

        @task
        def rows() -> list[dict[str, int]]:
            return [{"x": 1, "y": 2}, {"x": 3, "y": 4}]

        add.partial(z=100).expand_kwargs([{"x": 1, "y": 2}, {"x": 10, "y": 20}])
        add.override(task_id="from_task").expand_kwargs(rows())
        BashTask.partial(task_id="echo").expand_kwargs([{"bash_command": "echo 1", "env": {"A": "1"}},
                                                        {"bash_command": "echo 2"}])
    literal = spec_of(dag, "add")["expand"]
    assert literal[0][0] == KWARGS and literal[0][1]["literal"] == 2
    assert dag.tasks["add"].for_instance(1, {}).op_kwargs == {"z": 100, "x": 10, "y": 20}
    passed = {"rows": {"return_value": [{"x": 1, "y": 2}, {"x": 3, "y": 4}, 5]}}
    assert expand_task(spec_of(dag, "from_task")["expand"], passed, max_length=10).count == 3
    assert dag.tasks["from_task"].for_instance(1, passed).op_kwargs == {"x": 3, "y": 4}
    with pytest.raises(ValueError, match="expand_kwargs\\(\\) item 2 is not a dict but a int"):
        dag.tasks["from_task"].for_instance(2, passed)
    echo = [dag.tasks["echo"].for_instance(i, {}) for i in range(2)]
    assert [(t.bash_command, t.env) for t in echo] == [("echo 1", {"A": "1"}), ("echo 2", {})]


@pytest.mark.parametrize(("make", "message"), [
    (lambda f: f.expand_kwargs([{"x": 1}, 2]), "item 1 is not a dict but a int"),
    (lambda f: f.expand_kwargs([{"nope": 1}]), "item 0 sets an unknown argument 'nope'"),
    (lambda f: f.partial(x=1).expand_kwargs([{"x": 2}]), "'x' is given to both partial\\(\\) and expand_kwargs"),
    (lambda f: f.expand_kwargs({"x": 1}), "maps over a list of dicts or another task's value"),
    (lambda f: f.expand(x=[1, 2]).zip(3), ""),
])
def test_bad_mapping_is_refused_when_the_file_is_parsed(make: Any, message: str) -> None:
    with DAG("bad", start_date=START):
        @task
        def f(x: int) -> int:
            return x

        if not message:  # zip() of something that is not a task's value or a list: refused when expanded over
            with pytest.raises(DagDefinitionError, match="is a int"):
                f.override(task_id="g").expand(x=make(f))
            return
        with pytest.raises(DagDefinitionError, match=message):
            make(f)


# -- mapped task groups ---------------------------------------------------------------------------------------


def grouped_dag() -> DAG:
    with DAG("g", start_date=START) as dag:
        @task
        def numbers() -> list[int]:
            return [1, 2]

        @task
        def first(n: int) -> int:
            return n + 1

        @task
        def second(m: int, tag: str) -> str:
            return f"{tag}{m}"

        @task
        def report(values: list[str]) -> list[str]:
            return values

        def group(n: Any, tag: Any) -> Any:
            return second(first(n), tag)

        report(expand_group(group, "per", partial={"tag": "#"}, expand={"n": numbers()}))
    return dag


def test_a_mapped_group_maps_every_task_and_an_instance_takes_its_siblings_same_instance() -> None:
    dag = grouped_dag()
    assert {t.task_id: t.mapped_group for t in dag.tasks.values()} == {
        "numbers": None, "per.first": "per", "per.second": "per", "report": None}
    passed = pull_view({"numbers": {"return_value": [1, 2]}, "per.first[0]": {"return_value": 2},
                        "per.first[1]": {"return_value": 3}})
    assert dag.tasks["per.first"].for_instance(1, passed).op_args == [2]  # the group's item 1: n=2
    second = dag.tasks["per.second"].for_instance(1, passed)
    assert resolve(second.op_args, passed) == [3, "#"]  # first[1]'s value, and the group's partial argument
    assert expand_task(spec_of(dag, "per.second")["expand"], passed, max_length=10).count == 2
    assert passed["per.first"] == {"return_value": [2, 3]}  # outside the group: the list


def test_in_a_mapped_group_an_instance_waits_for_its_siblings_same_instance_only() -> None:
    structure = structure_of(grouped_dag())
    spec = read_spec("v", json.dumps(structure))
    S = TaskState
    states = {"numbers": TiState(S.SUCCESS), "per.first[0]": TiState(S.FAILED), "per.first[1]": TiState(S.SUCCESS),
              "per.second[0]": TiState(S.SCHEDULED), "per.second[1]": TiState(S.SCHEDULED),
              "report": TiState(S.SCHEDULED)}
    decision = decide(spec, states, None, now=START)
    assert decision.mark == {"per.second[0]": S.UPSTREAM_FAILED, "report": S.UPSTREAM_FAILED}
    assert decision.ready == ["per.second[1]"]
    # not expanded yet, a task of the group waits for the tasks outside it only (its count comes from there)
    waiting = {"numbers": TiState(S.SUCCESS), "per.first": TiState(S.SCHEDULED), "per.second": TiState(S.SCHEDULED),
               "report": TiState(S.SCHEDULED)}
    assert sorted(decide(spec, waiting, None, now=START).expand) == ["per.first", "per.second"]


def test_a_mapped_task_inside_a_mapped_group_is_refused() -> None:
    with DAG("bad", start_date=START):
        @task
        def f(x: int) -> int:
            return x

        def group(n: Any) -> Any:
            return f.expand(x=[1, 2])

        with pytest.raises(DagDefinitionError, match="is mapped itself"):
            expand_group(group, "g", partial={}, expand={"n": [1, 2]})
