"""Dynamic task mapping's rules, pure: how many instances a task gets, which values each gets, what a downstream
task and a pull see, and what authoring refuses. No database, no clock."""

from __future__ import annotations

import re
from typing import Any

import pendulum
import pytest

from ledger import DAG, BashTask, PythonTask, task
from ledger.core.dependencies import PreviousRun, TiState, decide
from ledger.core.errors import DagDefinitionError
from ledger.core.mapping import choose_instance, expand, expand_task, instance_args, label, split_label
from ledger.core.states import RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.sdk.describe import read_spec, version_of
from ledger.sdk.xcom import XComRef, pull_view

S = TaskState
START = pendulum.datetime(2024, 3, 1, tz="UTC")
NOW = pendulum.datetime(2024, 3, 10, tz="UTC")
FROM_NUMS = (("x", {"xcom_from": "nums", "key": "return_value"}),)


def spec_of(dag: DAG) -> DagSpec:
    version, text = version_of(dag)
    return read_spec(version, text)


def mapped_dag() -> DAG:
    with DAG("m", schedule=None, start_date=START) as dag:
        @task
        def nums() -> list[int]:
            return [1, 2]

        @task
        def add(x: int, y: int) -> int:
            return x + y

        @task
        def total(values: list[int]) -> int:
            return sum(values)

        total(add.partial(y=1).expand(x=nums()))
        BashTask.partial(task_id="echo", env={"A": "1"}).expand(bash_command=["echo 1", "echo 2", "echo 3"])
    return dag


# -- the expansion rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("values", "count", "state", "reason"), [
    pytest.param([("x", [1, 2, 3])], 3, None, None, id="a-list-gives-one-instance-per-value"),
    pytest.param([("x", [1, 2]), ("y", ["a", "b", "c"])], 6, None, None, id="two-lists-give-every-combination"),
    pytest.param([("x", [])], 0, "skipped", "empty list for x", id="an-empty-list-skips"),
    pytest.param([("x", "abc")], 0, "failed", "it is not a list but a str 'abc'", id="a-string-fails"),
    pytest.param([("x", {"a": 1})], 0, "failed", "not a list but a dict", id="a-dict-fails"),
    pytest.param([("x", None)], 0, "failed", "not a list but a NoneType", id="none-fails"),
    pytest.param([("x", list(range(11)))], 0, "failed", "11 instances, more than the 10 allowed", id="too-long-fails"),
])
def test_expansion_gives_a_count_or_the_state_and_reason_instead(values: list[tuple[str, Any]], count: int,
                                                                 state: str | None, reason: str | None) -> None:
    found = expand(values, source="task 'nums'", max_length=10)
    assert (found.count, found.state) == (count, state)
    assert (found.reason is None) if reason is None else (reason in (found.reason or ""))


def test_expansion_over_an_upstream_reads_its_value_and_fails_when_it_passed_none() -> None:
    assert expand_task(FROM_NUMS, {"nums": {"return_value": [5, 6]}}, max_length=10).count == 2
    missing = expand_task(FROM_NUMS, {}, max_length=10)
    assert missing.state == "failed" and "task 'nums' passed no value 'return_value'" in (missing.reason or "")
    literal = expand_task((("x", {"literal": 3, "values": [1, 2, 3]}),), {}, max_length=10)
    assert literal.count == 3


def test_each_instance_gets_one_combination_the_last_argument_varying_fastest() -> None:
    lists = [("x", [1, 2]), ("y", ["a", "b", "c"])]
    assert [instance_args(lists, i) for i in range(6)] == [
        {"x": 1, "y": "a"}, {"x": 1, "y": "b"}, {"x": 1, "y": "c"},
        {"x": 2, "y": "a"}, {"x": 2, "y": "b"}, {"x": 2, "y": "c"}]
    with pytest.raises(IndexError):
        instance_args(lists, 6)


def test_an_instance_is_named_by_its_task_and_map_index_and_back() -> None:
    assert label("load.copy", 2) == "load.copy[2]" and label("load.copy", -1) == "load.copy"
    assert split_label("load.copy[2]") == ("load.copy", 2) and split_label("load.copy") == ("load.copy", -1)


def test_a_command_about_a_mapped_task_must_name_an_instance_that_exists() -> None:
    assert choose_instance("t", 1, [-1], None) == -1
    assert choose_instance("t", 1, [0, 1, 2], 1) == 1
    with pytest.raises(LookupError, match=r"is mapped \(3 instance\(s\): 0-2\); choose one with --map-index"):
        choose_instance("t", 1, [0, 1, 2], None)
    with pytest.raises(LookupError, match=r"has no instance 5 \(instances 0-2\)"):
        choose_instance("t", 1, [0, 1, 2], 5)
    with pytest.raises(LookupError, match=r"has no instance 0 \(no mapped instances\)"):
        choose_instance("t", 1, [-1], 0)
    with pytest.raises(LookupError, match="run 1 has no task 't'"):
        choose_instance("t", 1, [], None)


def test_pulling_a_mapped_tasks_value_gives_its_instances_values_by_map_index() -> None:
    stored = {"add[2]": {"return_value": 30}, "add[0]": {"return_value": 10}, "add[1]": {"other": 1},
              "nums": {"return_value": [1, 2, 3]}}
    assert pull_view(stored) == {"add": {"return_value": [10, 30], "other": [1]},
                                 "nums": {"return_value": [1, 2, 3]},
                                 # and each instance's own, by label (a mapped task group's tasks read them)
                                 "add[0]": {"return_value": 10}, "add[1]": {"other": 1}, "add[2]": {"return_value": 30}}


# -- deciding a run with mapped instances ------------------------------------------------------------------

def test_a_task_mapped_over_an_upstream_waits_then_is_expanded_when_the_upstream_succeeded() -> None:
    spec = spec_of(mapped_dag())
    waiting = {"nums": TiState(S.RUNNING), "add": TiState(S.SCHEDULED), "total": TiState(S.SCHEDULED),
               **{f"echo[{i}]": TiState(S.SUCCESS) for i in range(3)}}
    assert decide(spec, waiting, None, now=NOW).expand == []
    done = {**waiting, "nums": TiState(S.SUCCESS)}
    decision = decide(spec, done, None, now=NOW)
    assert decision.expand == ["add"] and decision.ready == [] and decision.run_state is None


def test_every_instance_runs_on_its_own_and_the_downstream_waits_for_all_of_them() -> None:
    spec = spec_of(mapped_dag())
    states = {"nums": TiState(S.SUCCESS), "add[0]": TiState(S.SUCCESS), "add[1]": TiState(S.UP_FOR_RETRY),
              "add[2]": TiState(S.SCHEDULED), "total": TiState(S.SCHEDULED),
              **{f"echo[{i}]": TiState(S.SUCCESS) for i in range(3)}}
    decision = decide(spec, states, None, now=NOW)
    assert decision.ready == ["add[1]", "add[2]"]  # the retry of instance 1 alone; total waits
    failed = {**states, "add[1]": TiState(S.FAILED), "add[2]": TiState(S.SUCCESS)}
    decision = decide(spec, failed, None, now=NOW)
    assert decision.mark == {"total": S.UPSTREAM_FAILED}  # one failed instance is a failed upstream
    assert decision.run_state == RunState.FAILED


def test_depends_on_past_needs_every_instance_of_the_previous_run_to_have_succeeded() -> None:
    with DAG("p", schedule="@daily", start_date=START) as dag:
        BashTask.partial(task_id="b", depends_on_past=True).expand(bash_command=["echo 1", "echo 2"])
    spec = spec_of(dag)
    states = {"b[0]": TiState(S.SCHEDULED), "b[1]": TiState(S.SCHEDULED)}
    assert decide(spec, states, PreviousRun({"b[0]": S.SUCCESS, "b[1]": S.SUCCESS}), now=NOW).ready == \
        ["b[0]", "b[1]"]
    assert decide(spec, states, PreviousRun({"b[0]": S.SUCCESS, "b[1]": S.FAILED}), now=NOW).ready == []


# -- authoring ----------------------------------------------------------------------------------------------

def test_the_version_records_what_a_task_is_expanded_over_and_a_literal_lists_length() -> None:
    spec = spec_of(mapped_dag())
    assert spec.tasks["add"].expand == FROM_NUMS and spec.tasks["add"].literal_count is None
    assert spec.tasks["add"].upstream == ("nums",)
    assert spec.tasks["echo"].literal_count == 3 and spec.tasks["echo"].expand[0][1]["values"] == [
        "echo 1", "echo 2", "echo 3"]
    assert not spec.tasks["total"].mapped


def test_a_mapped_task_runs_as_its_instance_with_that_instances_value() -> None:
    dag = mapped_dag()
    add = dag.tasks["add"]
    assert isinstance(add, PythonTask)
    one = add.for_instance(1, {"nums": {"return_value": [5, 6]}})
    assert isinstance(one, PythonTask) and one.op_kwargs == {"y": 1, "x": 6} and add.op_kwargs == {"y": 1}
    echo = dag.tasks["echo"].for_instance(2, {})
    assert isinstance(echo, BashTask) and echo.bash_command == "echo 3" and echo.env == {"A": "1"}
    with pytest.raises(ValueError, match="not a list"):
        add.for_instance(0, {"nums": {"return_value": "x"}})


def test_classic_tasks_expand_their_fields_with_partial() -> None:
    with DAG("c", schedule=None, start_date=START) as dag:
        up = BashTask("up", "echo up")
        mapped = PythonTask.partial(task_id="p", python_callable=print).expand(
            op_kwargs=XComRef("up"))
    assert mapped.upstream_ids == {"up"} and up.downstream_ids == {"p"}
    assert spec_of(dag).tasks["p"].expand == (("op_kwargs", {"xcom_from": "up", "key": "return_value"}),)


@pytest.mark.parametrize(("build", "message"), [
    pytest.param(lambda f: f.expand(x=3), "expand() maps over a list or another task's value; x= is a int",
                 id="a-non-list-literal"),
    pytest.param(lambda f: f.expand(x="abc"), "x= is a str", id="a-string"),
    pytest.param(lambda f: f.partial(x=1).expand(x=[1]), "'x' is given to both partial() and expand()",
                 id="an-argument-also-given-to-partial"),
    pytest.param(lambda f: f.expand(z=[1]), "expand() got an unknown argument 'z'; it takes: x, y",
                 id="an-unknown-argument"),
    pytest.param(lambda f: f.partial(z=1), "partial() got an unknown argument 'z'", id="an-unknown-partial"),
    pytest.param(lambda f: f.expand(), "expand() needs at least one argument", id="nothing-to-map-over"),
    pytest.param(lambda f: BashTask.partial(task_id="b").expand(bash_command="echo"), "bash_command= is a str",
                 id="a-classic-non-list"),
    pytest.param(lambda f: BashTask.partial(task_id="b").expand(command=["echo"]),
                 "unknown argument 'command'; it takes: bash_command, env, cwd", id="a-classic-unknown-field"),
    pytest.param(lambda f: BashTask.partial(task_id="b", bash_command="x").expand(bash_command=["echo"]),
                 "'bash_command' is given to both", id="a-classic-field-also-in-partial"),
    pytest.param(lambda f: BashTask("a[1]", "echo"), "may not contain '[' or ']'", id="a-bracket-in-a-task-id"),
])
def test_authoring_refuses_bad_mapping_with_one_clear_message(build: Any, message: str) -> None:
    with pytest.raises(DagDefinitionError, match=re.escape(message)), DAG("bad", schedule=None, start_date=START):
        @task
        def f(x: int, y: int) -> int:
            return x + y

        build(f)


def test_a_literal_longer_than_the_maximum_is_refused_at_parse_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_MAX_MAP_LENGTH", "2")
    with pytest.raises(DagDefinitionError, match=r"expand\(\) over 3 values, more than the 2 allowed"), \
            DAG("long", schedule=None, start_date=START):
        BashTask.partial(task_id="b").expand(bash_command=["a", "b", "c"])


def test_the_maximum_number_of_instances_is_a_setting_checked_when_read() -> None:
    from ledger.core.errors import ConfigError
    from ledger.core.mapping import max_map_length
    from ledger.infra.scheduler_settings import SchedulerSettings

    assert max_map_length({}) == 1024 and max_map_length({"LEDGER_MAX_MAP_LENGTH": "5"}) == 5
    assert SchedulerSettings.from_env({"LEDGER_MAX_MAP_LENGTH": "7"}).max_map_length == 7
    with pytest.raises(ConfigError, match="LEDGER_MAX_MAP_LENGTH='many' is not a valid number"):
        max_map_length({"LEDGER_MAX_MAP_LENGTH": "many"})
    with pytest.raises(ConfigError, match="max_map_length must be at least 1"):
        SchedulerSettings.from_env({"LEDGER_MAX_MAP_LENGTH": "0"})


def test_instances_removed_by_an_expansion_over_a_shorter_list_are_no_upstream_and_do_not_fail_the_run() -> None:
    spec = spec_of(mapped_dag())
    states = {"nums": TiState(S.SUCCESS), "add[0]": TiState(S.SUCCESS), "add[1]": TiState(S.REMOVED),
              "total": TiState(S.SCHEDULED), **{f"echo[{i}]": TiState(S.SUCCESS) for i in range(3)}}
    assert decide(spec, states, None, now=NOW).ready == ["total"]
    done = decide(spec, {**states, "total": TiState(S.SUCCESS), "add[1]": TiState(S.REMOVED)}, None, now=NOW)
    assert done.run_state == RunState.SUCCESS
