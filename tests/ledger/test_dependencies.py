"""Trigger rules, depends_on_past along the chain, and when a run is finished."""

from __future__ import annotations

from datetime import timedelta

import pendulum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import DAG, BashTask
from ledger.core.dependencies import PreviousRun, TiState, decide, ready_alone, trigger_rule_outcome
from ledger.core.states import RunState, TaskState
from ledger.sdk.dag import TRIGGER_RULES
from ledger.sdk.describe import read_spec, version_of
from tests.conftest import examples

S = TaskState
NOW = pendulum.datetime(2024, 3, 10, tz="UTC")


def spec_of(dag: DAG):  # type: ignore[no-untyped-def]
    return read_spec(*version_of(dag))


def chain_dag(**task_args: object) -> DAG:
    with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
        a = BashTask("a", "true", **task_args)  # type: ignore[arg-type]
        b = BashTask("b", "true")
        a >> b
    return dag


@pytest.mark.parametrize(("rule", "upstream", "expected"), [
    pytest.param("all_success", [S.SUCCESS, S.SUCCESS], S.SCHEDULED, id="all-success-ready"),
    pytest.param("all_success", [S.SUCCESS, S.RUNNING], None, id="all-success-waits"),
    pytest.param("all_success", [S.FAILED, S.RUNNING], S.UPSTREAM_FAILED, id="all-success-failed-upstream"),
    pytest.param("all_success", [S.SKIPPED, S.SUCCESS], S.SKIPPED, id="all-success-skip-propagates"),
    pytest.param("all_done", [S.FAILED, S.SKIPPED], S.SCHEDULED, id="all-done-after-failure"),
    pytest.param("all_done", [S.FAILED, S.RUNNING], None, id="all-done-waits"),
    pytest.param("one_success", [S.SUCCESS, S.RUNNING], S.SCHEDULED, id="one-success-early"),
    pytest.param("one_success", [S.FAILED, S.SKIPPED], S.UPSTREAM_FAILED, id="one-success-none"),
    pytest.param("one_failed", [S.FAILED, S.RUNNING], S.SCHEDULED, id="one-failed-early"),
    pytest.param("one_failed", [S.SUCCESS, S.SUCCESS], S.SKIPPED, id="one-failed-none-failed"),
    pytest.param("none_failed", [S.SUCCESS, S.SKIPPED], S.SCHEDULED, id="none-failed-with-skip"),
    pytest.param("none_failed", [S.UPSTREAM_FAILED, S.SUCCESS], S.UPSTREAM_FAILED, id="none-failed-fails"),
    pytest.param("all_failed", [S.FAILED, S.UPSTREAM_FAILED], S.SCHEDULED, id="all-failed-ready"),
    pytest.param("all_failed", [S.FAILED, S.SUCCESS], S.SKIPPED, id="all-failed-skips"),
    pytest.param("always", [S.RUNNING, S.QUEUED], S.SCHEDULED, id="always-without-waiting"),
    pytest.param("all_done_min_one_success", [S.FAILED, S.SUCCESS], S.SCHEDULED, id="done-min-one-ready"),
    pytest.param("all_done_min_one_success", [S.SUCCESS, S.RUNNING], None, id="done-min-one-waits"),
    pytest.param("all_done_min_one_success", [S.FAILED, S.SKIPPED], S.UPSTREAM_FAILED, id="done-min-one-none"),
    pytest.param("all_done_min_one_success", [S.SKIPPED, S.SKIPPED], S.SKIPPED, id="done-min-one-all-skipped"),
    pytest.param("all_skipped", [S.SKIPPED, S.SKIPPED], S.SCHEDULED, id="all-skipped-ready"),
    pytest.param("all_skipped", [S.SKIPPED, S.SUCCESS], S.SKIPPED, id="all-skipped-not"),
    pytest.param("all_skipped", [S.SKIPPED, S.RUNNING], None, id="all-skipped-waits"),
    pytest.param("one_done", [S.FAILED, S.RUNNING], S.SCHEDULED, id="one-done-early"),
    pytest.param("one_done", [S.SKIPPED, S.SKIPPED], S.SKIPPED, id="one-done-none"),
    pytest.param("none_failed_min_one_success", [S.SUCCESS, S.SKIPPED], S.SCHEDULED, id="nfmos-ready"),
    pytest.param("none_failed_min_one_success", [S.SKIPPED, S.SKIPPED], S.SKIPPED, id="nfmos-all-skipped"),
    pytest.param("none_failed_min_one_success", [S.FAILED, S.RUNNING], S.UPSTREAM_FAILED, id="nfmos-failed"),
    pytest.param("none_skipped", [S.SUCCESS, S.FAILED], S.SCHEDULED, id="none-skipped-ready"),
    pytest.param("none_skipped", [S.SKIPPED, S.RUNNING], S.SKIPPED, id="none-skipped-skips"),
])
def test_trigger_rules_follow_airflow(rule: str, upstream: list[TaskState], expected: TaskState | None) -> None:
    assert trigger_rule_outcome(rule, upstream) == expected


def test_a_task_without_upstream_is_ready_and_its_downstream_waits() -> None:
    d = decide(spec_of(chain_dag()), {"a": TiState(S.SCHEDULED), "b": TiState(S.SCHEDULED)}, None, now=NOW)
    assert d.ready == ["a"] and d.mark == {} and d.run_state is None


def test_a_failed_upstream_marks_downstream_upstream_failed_and_fails_the_run() -> None:
    d = decide(spec_of(chain_dag()), {"a": TiState(S.FAILED), "b": TiState(S.SCHEDULED)}, None, now=NOW)
    assert d.mark == {"b": S.UPSTREAM_FAILED}
    assert d.run_state == RunState.FAILED


def test_a_run_succeeds_when_every_leaf_succeeded_or_was_skipped() -> None:
    d = decide(spec_of(chain_dag()), {"a": TiState(S.SUCCESS), "b": TiState(S.SKIPPED)}, None, now=NOW)
    assert d.run_state == RunState.SUCCESS


def test_a_retry_waits_for_its_delay() -> None:
    later = NOW + timedelta(minutes=5)
    d = decide(spec_of(chain_dag()), {"a": TiState(S.UP_FOR_RETRY, later), "b": TiState(S.SCHEDULED)}, None,
               now=NOW)
    assert d.ready == [] and d.retry_at == later
    d = decide(spec_of(chain_dag()), {"a": TiState(S.UP_FOR_RETRY, NOW), "b": TiState(S.SCHEDULED)}, None, now=NOW)
    assert d.ready == ["a"]


def test_depends_on_past_waits_for_the_same_task_in_the_previous_run() -> None:
    spec = spec_of(chain_dag(depends_on_past=True))
    states = {"a": TiState(S.SCHEDULED), "b": TiState(S.SCHEDULED)}
    assert decide(spec, states, PreviousRun({"a": S.RUNNING}), now=NOW).waiting_on_past == ["a"]
    assert decide(spec, states, PreviousRun({"a": S.FAILED}), now=NOW).waiting_on_past == ["a"]
    assert decide(spec, states, PreviousRun({"a": S.SUCCESS}), now=NOW).ready == ["a"]
    assert decide(spec, states, PreviousRun({"a": S.SKIPPED}), now=NOW).ready == ["a"]


def test_depends_on_past_is_satisfied_without_a_previous_run_or_without_the_task_in_it() -> None:
    spec = spec_of(chain_dag(depends_on_past=True))
    states = {"a": TiState(S.SCHEDULED), "b": TiState(S.SCHEDULED)}
    assert decide(spec, states, None, now=NOW).ready == ["a"]
    assert decide(spec, states, PreviousRun({"other": S.FAILED}), now=NOW).ready == ["a"]


def test_wait_for_downstream_also_needs_the_previous_runs_downstream_tasks() -> None:
    spec = spec_of(chain_dag(wait_for_downstream=True))
    states = {"a": TiState(S.SCHEDULED), "b": TiState(S.SCHEDULED)}
    assert decide(spec, states, PreviousRun({"a": S.SUCCESS, "b": S.RUNNING}), now=NOW).waiting_on_past == ["a"]
    assert decide(spec, states, PreviousRun({"a": S.SUCCESS, "b": S.SUCCESS}), now=NOW).ready == ["a"]


def test_only_an_armed_root_task_without_depends_on_past_is_ready_alone() -> None:
    with DAG("d", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
        fed = BashTask("fed", "true", signals={"k": "START"})
        BashTask("plain", "true")
        BashTask("past", "true", depends_on_past=True)
        fed >> BashTask("after", "true")
    spec = spec_of(dag)
    armed, waiting = TiState(S.SCHEDULED, None, True), TiState(S.SCHEDULED, None, False)
    assert ready_alone(spec, "fed", armed)
    assert not ready_alone(spec, "fed", waiting)  # it waits for its signal
    assert ready_alone(spec, "plain", waiting)
    assert not ready_alone(spec, "past", armed)  # the previous run decides
    assert not ready_alone(spec, "after", armed)  # its upstream decides
    assert not ready_alone(spec, "fed", TiState(S.SCHEDULED, NOW, True))  # a retry waits for its time
    assert not ready_alone(spec, "fed", TiState(S.RUNNING, None, True))
    assert not ready_alone(spec, "gone", armed)
    for tid in ("fed", "plain"):  # whatever ready_alone says, decide agrees
        states = {t: TiState(S.SCHEDULED, None, True) for t in spec.tasks}
        assert tid in decide(spec, states, None, now=NOW).ready


# -- every rule against a reference written from Airflow's documentation ------------------------------------

DONE = {S.SUCCESS, S.FAILED, S.UPSTREAM_FAILED, S.SKIPPED, S.STOPPED, S.REMOVED}


def reference(rule: str, up: list[TaskState]) -> TaskState | None:
    """Airflow's documented meaning of each rule: when the task may run (SCHEDULED), when it is decided that
    it will not (UPSTREAM_FAILED or SKIPPED), else not yet decided (None)."""
    ok = any(s in (S.SUCCESS, S.STOPPED) for s in up)
    every_ok = all(s in (S.SUCCESS, S.STOPPED) for s in up)
    bad = any(s in (S.FAILED, S.UPSTREAM_FAILED) for s in up)
    skip = any(s == S.SKIPPED for s in up)
    every_skip = all(s == S.SKIPPED for s in up)
    done = all(s in DONE for s in up)
    run, wait = S.SCHEDULED, None
    no_success = S.UPSTREAM_FAILED if bad else S.SKIPPED
    if rule == "always":
        return run
    if rule == "all_success":
        return S.UPSTREAM_FAILED if bad else S.SKIPPED if skip else run if every_ok else wait
    if rule == "all_failed":
        return S.SKIPPED if ok or skip else run if done else wait
    if rule == "all_done":
        return run if done else wait
    if rule == "all_done_min_one_success":
        return wait if not done else run if ok else no_success
    if rule == "all_skipped":
        return S.SKIPPED if ok or bad else run if done and every_skip else wait
    if rule == "one_success":
        return run if ok else no_success if done else wait
    if rule == "one_failed":
        return run if bad else S.SKIPPED if done else wait
    if rule == "one_done":
        return run if ok or bad else S.SKIPPED if done else wait
    if rule == "none_failed":
        return S.UPSTREAM_FAILED if bad else run if done else wait
    if rule == "none_failed_min_one_success":
        return S.UPSTREAM_FAILED if bad else wait if not done else run if ok else S.SKIPPED
    if rule == "none_skipped":
        return S.SKIPPED if skip else run if done else wait
    raise AssertionError(rule)


@settings(max_examples=examples(500), deadline=None)
@given(rule=st.sampled_from(TRIGGER_RULES),
       up=st.lists(st.sampled_from([S.SUCCESS, S.FAILED, S.UPSTREAM_FAILED, S.SKIPPED, S.RUNNING, S.QUEUED,
                                    S.SCHEDULED, S.UP_FOR_RETRY]), min_size=1, max_size=5))
def test_every_trigger_rule_matches_its_documented_meaning(rule: str, up: list[TaskState]) -> None:
    got = trigger_rule_outcome(rule, up)
    assert got == reference(rule, up), (rule, up)
    if all(s in DONE for s in up):
        assert got is not None  # once every upstream has finished, each rule has decided
