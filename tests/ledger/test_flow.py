"""Control flow as pure rules (ledger/core/flow.py through ledger.core.dependencies.decide): what a branch or a
short-circuit
skips and how the skip spreads, setup and teardown tasks, and what a clear takes with it. No database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pendulum
import pytest

from ledger import DAG, BashTask, TaskGroup
from ledger.core.dependencies import TiState, decide
from ledger.core.flow import FLOW_KEY, BranchError, branch_targets, teardowns_left_to_run, with_setups_and_teardowns
from ledger.core.states import RunState, TaskState
from ledger.core.versions import DagSpec
from ledger.sdk.branching import BranchPythonTask, ShortCircuitTask, in_window, is_latest
from ledger.sdk.describe import read_spec, version_of

S = TaskState
NOW = pendulum.datetime(2024, 3, 10, tz="UTC")
START = pendulum.datetime(2024, 1, 1, tz="UTC")


def spec_of(dag: DAG) -> DagSpec:
    return read_spec(*version_of(dag))


def step(spec: DagSpec, states: Mapping[str, TaskState], values: Mapping[str, Any] | None = None,
         ) -> tuple[dict[str, TaskState], dict[str, str], RunState | None, list[str]]:
    """Decide until nothing more is marked: the states, why each flow skip happened, the run's state, and the
    task instances ready to be queued at the end."""
    current = {k: TiState(v) for k, v in states.items()}
    reasons: dict[str, str] = {}
    while True:
        decision = decide(spec, current, None, now=NOW, values=values)
        reasons.update(decision.reasons)
        for key, st in decision.mark.items():
            current[key] = TiState(st)
        if not decision.mark:
            return {k: v.state for k, v in current.items()}, reasons, decision.run_state, decision.ready


def branch_dag(*, join_rule: str = "none_failed_min_one_success", direct_join: bool = False) -> DagSpec:
    """pick >> [a, b]; b >> after_b; [a, after_b] >> join (and pick >> join when `direct_join`)."""
    with DAG("branchy", start_date=START) as dag:
        pick = BranchPythonTask("pick", python_callable=lambda: "a")
        a, b = BashTask("a", "true"), BashTask("b", "true")
        after_b = BashTask("after_b", "true")
        join = BashTask("join", "true", trigger_rule=join_rule)
        pick >> [a, b]
        b >> after_b
        [a, after_b] >> join
        if direct_join:
            pick >> join
    return spec_of(dag)


def chose(*followed: str) -> dict[str, Any]:
    return {"pick": {FLOW_KEY: {"followed": list(followed)}}}


def test_a_branch_skips_the_tasks_it_did_not_follow_and_the_skip_spreads_by_trigger_rules() -> None:
    spec = branch_dag()
    states, reasons, _run, ready = step(spec, {"pick": S.SUCCESS, "a": S.SCHEDULED, "b": S.SCHEDULED,
                                              "after_b": S.SCHEDULED, "join": S.SCHEDULED}, chose("a"))
    assert states["b"] == S.SKIPPED and reasons["b"] == "branch pick followed a"
    assert states["after_b"] == S.SKIPPED and "after_b" not in reasons  # by its trigger rule, all_success
    assert ready == ["a"]
    states, _reasons, run_state, ready = step(spec, {**states, "a": S.SUCCESS}, chose("a"))
    assert ready == ["join"] and run_state is None  # none_failed_min_one_success runs after a skipped path


def test_a_join_that_a_followed_task_leads_to_is_not_skipped_by_the_branch() -> None:
    spec = branch_dag(direct_join=True)
    states, reasons, _run, _ready = step(spec, {t: S.SCHEDULED for t in spec.tasks} | {"pick": S.SUCCESS},
                                         chose("a"))
    assert states["join"] == S.SCHEDULED and "join" not in reasons
    assert states["b"] == S.SKIPPED


def test_a_branch_that_follows_nothing_skips_each_task_directly_after_it() -> None:
    spec = branch_dag()
    states, reasons, _run, _ready = step(spec, {t: S.SCHEDULED for t in spec.tasks} | {"pick": S.SUCCESS}, chose())
    assert states["a"] == states["b"] == S.SKIPPED and reasons["a"] == "branch pick followed nothing"
    assert states["join"] == S.SKIPPED  # none_failed_min_one_success with every upstream skipped


def test_a_choice_counts_only_while_its_branch_has_succeeded() -> None:
    spec = branch_dag()
    for state in (S.SCHEDULED, S.RUNNING, S.FAILED):  # cleared and waiting, running again, or failed
        _states, reasons, _run, _ready = step(spec, {t: S.SCHEDULED for t in spec.tasks} | {"pick": state},
                                             chose("a"))
        assert "b" not in reasons


def test_a_cleared_task_its_branch_did_not_follow_is_skipped_again() -> None:
    spec = branch_dag()
    done = {"pick": S.SUCCESS, "a": S.SUCCESS, "b": S.SCHEDULED, "after_b": S.SKIPPED, "join": S.SUCCESS}
    states, reasons, _run, ready = step(spec, done, chose("a"))
    assert states["b"] == S.SKIPPED and ready == [] and reasons["b"] == "branch pick followed a"


def short_circuit_dag(*, ignore: bool) -> DagSpec:
    """check >> x >> y (all_done), other >> y; and a teardown after x."""
    with DAG("sc", start_date=START) as dag:
        check = ShortCircuitTask("check", python_callable=lambda: False, ignore_downstream_trigger_rules=ignore)
        x = BashTask("x", "true")
        y = BashTask("y", "true", trigger_rule="all_done")
        other = BashTask("other", "true")
        check >> x >> y
        other >> y
    return spec_of(dag)


@pytest.mark.parametrize(("ignore", "y_state"), [
    pytest.param(True, S.SKIPPED, id="ignoring-trigger-rules-skips-all-downstream"),
    pytest.param(False, S.SCHEDULED, id="keeping-trigger-rules-lets-all-done-run"),
])
def test_a_falsy_short_circuit_skips_by_its_ignore_downstream_trigger_rules(ignore: bool, y_state: S) -> None:
    spec = short_circuit_dag(ignore=ignore)
    skipped = ["x", "y"] if ignore else ["x"]
    states, reasons, _run, ready = step(spec, {"check": S.SUCCESS, "x": S.SCHEDULED, "y": S.SCHEDULED,
                                              "other": S.RUNNING},
                                        {"check": {FLOW_KEY: {"skipped": skipped}}})
    assert states["x"] == S.SKIPPED and reasons["x"] == "short-circuit check: its condition was falsy"
    assert states["y"] == y_state  # skipped at once, even with an upstream still running; or left to all_done
    assert ready == []  # (other is still running)


def test_a_short_circuit_never_skips_a_teardown() -> None:
    from ledger.core.flow import short_circuit_skips

    downstream = {"check": ["work"], "work": ["down"], "down": []}
    assert short_circuit_skips(downstream, ["down"], "check", ignore_downstream_trigger_rules=True) == ["work"]
    assert short_circuit_skips(downstream, [], "check", ignore_downstream_trigger_rules=False) == ["work"]


def test_branch_targets_name_tasks_or_group_roots_and_refuse_anything_else() -> None:
    tasks, groups = ["a", "b", "g.first", "g.second"], {"g": ["g.first"]}
    assert branch_targets(None, tasks, groups) == []
    assert branch_targets("a", tasks, groups) == ["a"]
    assert branch_targets(["b", "a", "b"], tasks, groups) == ["b", "a"]
    assert branch_targets("g", tasks, groups) == ["g.first"]
    with pytest.raises(BranchError, match="'nope', which is not a task or task group"):
        branch_targets(["a", "nope"], tasks, groups)
    with pytest.raises(BranchError, match="not int"):
        branch_targets(3, tasks, groups)


def setup_teardown_dag(*, fail_dagrun: bool = False) -> DagSpec:
    with DAG("st", start_date=START) as dag:
        create = BashTask("create", "true").as_setup()
        work = BashTask("work", "true")
        delete = BashTask("delete", "true").as_teardown(setups=create, on_failure_fail_dagrun=fail_dagrun)
        create >> work >> delete
    return spec_of(dag)


def test_a_teardown_runs_after_failed_work_and_the_run_fails_by_its_work() -> None:
    spec = setup_teardown_dag()
    _states, _reasons, run_state, ready = step(spec, {"create": S.SUCCESS, "work": S.FAILED, "delete": S.SCHEDULED})
    assert ready == ["delete"] and run_state is None
    *_, run_state, _ready = step(spec, {"create": S.SUCCESS, "work": S.FAILED, "delete": S.SUCCESS})
    assert run_state == RunState.FAILED


@pytest.mark.parametrize(("fail_dagrun", "expected"), [
    pytest.param(False, RunState.SUCCESS, id="teardown-ignored"),
    pytest.param(True, RunState.FAILED, id="on_failure_fail_dagrun"),
])
def test_a_failed_teardown_fails_the_run_only_with_on_failure_fail_dagrun(fail_dagrun: bool,
                                                                          expected: RunState) -> None:
    spec = setup_teardown_dag(fail_dagrun=fail_dagrun)
    *_, run_state, _ready = step(spec, {"create": S.SUCCESS, "work": S.SUCCESS, "delete": S.FAILED})
    assert run_state == expected


@pytest.mark.parametrize(("setup_state", "teardown_state"), [
    pytest.param(S.SKIPPED, S.SKIPPED, id="setup-skipped"),
    pytest.param(S.FAILED, S.UPSTREAM_FAILED, id="setup-failed"),
])
def test_a_teardown_whose_setup_did_not_succeed_does_not_run(setup_state: S, teardown_state: S) -> None:
    spec = setup_teardown_dag()
    states, *_ = step(spec, {"create": setup_state, "work": S.SCHEDULED, "delete": S.SCHEDULED})
    assert states["delete"] == teardown_state


def test_clearing_a_work_task_clears_its_setup_and_teardown_and_not_unrelated_tasks() -> None:
    with DAG("clear", start_date=START) as dag:
        create = BashTask("create", "true").as_setup()
        work, other = BashTask("work", "true"), BashTask("other", "true")
        delete = BashTask("delete", "true").as_teardown(setups=create)
        create >> work >> delete
        with TaskGroup("g"):
            BashTask("alone", "true")
    spec = spec_of(dag)
    assert with_setups_and_teardowns(spec, {"work"}) == {"create", "work", "delete"}
    assert with_setups_and_teardowns(spec, {"create"}) == {"create", "delete"}
    assert with_setups_and_teardowns(spec, {other.task_id}) == {"other"}


@pytest.mark.parametrize(("states", "marked", "left"), [
    pytest.param({"create": S.SUCCESS, "work": S.SCHEDULED, "delete": S.SCHEDULED}, S.FAILED, {"delete"},
                 id="work-marked-failed"),
    pytest.param({"create": S.SUCCESS, "work": S.SCHEDULED, "delete": S.SCHEDULED}, S.SUCCESS, {"delete"},
                 id="work-marked-success"),
    pytest.param({"create": S.SUCCESS, "work": S.SCHEDULED, "delete": S.SUCCESS}, S.FAILED, set(),
                 id="teardown-finished"),
    # the run would end failed by its failed work, not success as marked: the mark ends it at once
    pytest.param({"create": S.SUCCESS, "work": S.FAILED, "delete": S.UP_FOR_RETRY}, S.SUCCESS, set(),
                 id="work-failed-marked-success"),
    pytest.param({"create": S.SUCCESS, "work": S.SUCCESS, "delete": S.SCHEDULED}, S.FAILED, set(),
                 id="work-succeeded-marked-failed"),
])
def test_marking_a_run_leaves_its_teardowns_to_run_when_the_work_then_gives_the_marked_state(
        states: dict[str, S], marked: S, left: set[str]) -> None:
    assert teardowns_left_to_run(setup_teardown_dag(), states, marked) == left  # they run as after failed work


@pytest.mark.parametrize(("now", "latest"), [
    pytest.param(START.add(days=1, hours=3), True, id="within-the-next-interval"),
    pytest.param(START.add(days=2), True, id="at-the-next-end"),
    pytest.param(START.add(days=2, seconds=1), False, id="after-the-next-end"),
    pytest.param(START.add(days=1), False, id="at-its-own-end"),
])
def test_a_run_is_the_latest_from_its_interval_end_to_the_end_of_the_next(now: pendulum.DateTime,
                                                                          latest: bool) -> None:
    assert is_latest(START.add(days=1), START.add(days=2), now) is latest


BERLIN = pendulum.timezone("Europe/Berlin")


@pytest.mark.parametrize(("at", "lower", "upper", "expected"), [
    pytest.param(dt.datetime(2024, 3, 1, 12, tzinfo=BERLIN), dt.time(9), dt.time(17), True, id="inside-times"),
    pytest.param(dt.datetime(2024, 3, 1, 18, tzinfo=BERLIN), dt.time(9), dt.time(17), False, id="after-times"),
    pytest.param(dt.datetime(2024, 3, 1, 23, tzinfo=BERLIN), dt.time(22), dt.time(2), True, id="over-midnight"),
    pytest.param(dt.datetime(2024, 3, 1, 12, tzinfo=BERLIN), None, dt.time(11), False, id="upper-only"),
    pytest.param(dt.datetime(2024, 3, 1, 12, tzinfo=BERLIN), dt.datetime(2024, 3, 1, 11), None, True,
                 id="naive-lower-in-its-zone"),
])
def test_branch_datetime_window(at: dt.datetime, lower: Any, upper: Any, expected: bool) -> None:
    assert in_window(at, lower, upper) is expected


def test_a_sensor_waiting_for_its_next_check_is_ready_only_when_it_is_due() -> None:
    with DAG("sensing", start_date=START) as dag:
        BashTask("s", "true")
    spec = spec_of(dag)
    later = NOW + dt.timedelta(seconds=30)
    waiting = decide(spec, {"s": TiState(S.UP_FOR_RESCHEDULE, later)}, None, now=NOW)
    assert waiting.ready == [] and waiting.retry_at == later and waiting.run_state is None
    assert decide(spec, {"s": TiState(S.UP_FOR_RESCHEDULE, later)}, None, now=later).ready == ["s"]


def test_tasks_made_inside_a_teardowns_with_block_run_between_its_setup_and_it() -> None:
    with DAG("ctx", start_date=START) as dag:
        create = BashTask("create", "true").as_setup()
        delete = BashTask("delete", "true").as_teardown(setups=create)
        with create >> delete:
            first = BashTask("first", "true")
            first >> BashTask("second", "true")
    assert dag.tasks["first"].upstream_ids == {"create"}
    assert dag.tasks["delete"].upstream_ids == {"create", "second"}
    with DAG("not_teardown", start_date=START), pytest.raises(Exception, match="only a teardown task"), \
            BashTask("plain", "true"):
        pass
