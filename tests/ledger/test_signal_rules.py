"""Signal-driven tasks: rules, actions, and how a run treats tasks that start on signals (pure)."""

from __future__ import annotations

import pendulum
import pytest

from ledger import DAG, BashTask, PythonTask
from ledger.core.dependencies import TiState, decide
from ledger.core.errors import DagDefinitionError
from ledger.core.signal_rules import SignalAction, can_start, evaluate, key_matches, matching_rules
from ledger.core.states import RunState, TaskState
from ledger.sdk.describe import read_spec, version_of

S = TaskState
A = SignalAction
NOW = pendulum.datetime(2024, 3, 10, tz="UTC")
START = pendulum.datetime(2024, 1, 1, tz="UTC")


def stream_dag() -> DAG:
    with DAG("stream", schedule=None, start_date=START) as dag:
        BashTask("produce", "sleep 1000", signals={"control": {"stop": "STOP", "restart": "RESTART"}})
        BashTask("consume", "true", signals={"batch": "START"})
    return dag


def test_rules_are_stored_as_json_in_the_version_and_only_when_declared() -> None:
    _hash, text = version_of(stream_dag())
    spec = read_spec(_hash, text)
    assert spec.tasks["consume"].signals == {"batch": {"action": "START"}}
    assert spec.tasks["produce"].signals == {"control": {"values": {"stop": "STOP", "restart": "RESTART"}}}
    with DAG("plain", schedule=None, start_date=START) as plain:
        BashTask("t", "true")
    assert '"signals"' not in version_of(plain)[1]


def test_a_function_rule_is_versioned_by_its_name_and_source() -> None:
    def on_batch(signal: object) -> SignalAction:
        return A.START

    with DAG("f", schedule=None, start_date=START) as dag:
        PythonTask("t", lambda: None, signals={"batch.*": on_batch})
    rule = read_spec(*version_of(dag)).tasks["t"].signals["batch.*"]
    assert rule["function"].endswith("on_batch") and len(rule["source_sha256"]) == 64
    assert evaluate(rule, "x") is None  # needs the DAG's code


@pytest.mark.parametrize("bad", [{"k": "GO"}, {"k": {}}, {"": "START"}, {"*": "START"}, {"k": {"v": "JUMP"}}])
def test_bad_rules_are_refused_when_the_dag_is_defined(bad: dict[str, object]) -> None:
    with pytest.raises(DagDefinitionError), DAG("bad", schedule=None, start_date=START):
        BashTask("t", "true", signals=bad)


def test_value_maps_fall_back_to_star_then_to_none() -> None:
    rule = {"values": {"stop": "STOP", "*": "START"}}
    assert evaluate(rule, "stop") == A.STOP and evaluate(rule, "anything") == A.START
    assert evaluate({"values": {"stop": "STOP"}}, "go") == A.NONE
    assert evaluate({"action": "restart".upper()}, "x") == A.RESTART


def test_exact_keys_win_over_prefixes() -> None:
    rules = {"ledger.task.etl.*": {"action": "START"}, "ledger.task.etl.load": {"action": "STOP"}}
    assert matching_rules(rules, "ledger.task.etl.load") == [{"action": "STOP"}]
    assert matching_rules(rules, "ledger.task.etl.extract") == [{"action": "START"}]
    assert matching_rules(rules, "ledger.task.other.x") == []
    assert key_matches("a.*", "a.b") and not key_matches("a.*", "b.a") and key_matches("a", "a")


def test_only_rules_that_can_start_make_a_task_start_on_signals() -> None:
    assert can_start([{"action": "START"}]) and can_start([{"values": {"x": "RESTART"}}])
    assert can_start([{"function": "f", "source_sha256": "0"}])
    assert not can_start([{"action": "STOP"}, {"values": {"x": "NONE", "y": "STOP"}}])
    spec = read_spec(*version_of(stream_dag()))
    assert spec.tasks["consume"].starts_on_signal and spec.tasks["produce"].starts_on_signal


def test_a_task_that_starts_on_signals_waits_until_armed() -> None:
    spec = read_spec(*version_of(stream_dag()))
    d = decide(spec, {"produce": TiState(S.RUNNING), "consume": TiState(S.SCHEDULED)}, None, now=NOW)
    assert d.ready == [] and d.waiting_for_signal == ["consume"] and d.run_state is None
    d = decide(spec, {"produce": TiState(S.RUNNING), "consume": TiState(S.SCHEDULED, armed=True)}, None, now=NOW)
    assert d.ready == ["consume"]


def test_when_everything_else_ended_a_task_still_waiting_for_a_signal_is_skipped_and_the_run_ends() -> None:
    spec = read_spec(*version_of(stream_dag()))
    d = decide(spec, {"produce": TiState(S.STOPPED), "consume": TiState(S.SCHEDULED)}, None, now=NOW)
    assert d.mark == {"consume": S.SKIPPED} and d.run_state == RunState.SUCCESS


def test_a_stopped_task_counts_as_done_for_its_downstream_and_the_run() -> None:
    with DAG("s", schedule=None, start_date=START) as dag:
        a = BashTask("a", "sleep 100", signals={"halt": "STOP"})
        b = BashTask("b", "true")
        a >> b
    spec = read_spec(*version_of(dag))
    assert not spec.tasks["a"].starts_on_signal  # a STOP-only rule: starts as usual
    assert decide(spec, {"a": TiState(S.SCHEDULED), "b": TiState(S.SCHEDULED)}, None, now=NOW).ready == ["a"]
    assert decide(spec, {"a": TiState(S.STOPPED), "b": TiState(S.SCHEDULED)}, None, now=NOW).ready == ["b"]
    done = decide(spec, {"a": TiState(S.STOPPED), "b": TiState(S.SUCCESS)}, None, now=NOW)
    assert done.run_state == RunState.SUCCESS
