"""Airflow 3's `retry_policy=` (ExceptionRetryPolicy, RetryRule, RetryAction, a RetryPolicy of one's own), as
Airflow applies it: asked in the try with the failure's exception, FAIL ends the task without its retries, RETRY
retries it after the rule's delay (never beyond `retries`), DEFAULT and no match leave the task's own rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file
from ledger.scheduler.runtime.try_outcome import retry_delay
from tests.conftest import Cli

POLICIES = """\
from datetime import timedelta
import pendulum
from airflow.sdk import DAG, ExceptionRetryPolicy, RetryAction, RetryDecision, RetryPolicy, RetryRule, task

START = pendulum.datetime(2024, 1, 1, tz="UTC")
POLICY = ExceptionRetryPolicy(rules=[
    RetryRule(exception="builtins.KeyError", action=RetryAction.FAIL, reason="bad input, not retryable"),
    RetryRule(exception=[LookupError, "json.JSONDecodeError"], retry_delay=timedelta(seconds=0)),
])


class EveryOther(RetryPolicy):
    def evaluate(self, exception, try_number, max_tries, context=None):
        assert context["ti"].try_number == try_number and max_tries == 3
        return RetryDecision.fail("odd") if try_number == 2 else RetryDecision.default()


class Broken(RetryPolicy):
    def evaluate(self, exception, try_number, max_tries, context=None):
        raise RuntimeError("the policy's own bug")


with DAG("retry_policies", start_date=START, schedule=None, default_args={"retries": 3}):
    @task(retry_policy=POLICY)
    def key_error():
        raise KeyError("k")

    @task(retry_policy=POLICY)
    def index_error():
        raise IndexError("i")

    @task(retry_policy=POLICY)
    def no_rule():
        raise ValueError("v")

    @task(retry_policy=EveryOther())
    def own():
        raise ValueError("o")

    @task(retry_policy=Broken())
    def broken():
        raise ValueError("b")

    key_error(); index_error(); no_rule(); own(); broken()
"""

# the scheduler waits out the rule's delay (none), not the task's (a day); the second try succeeds
SCHEDULED = """\
from datetime import timedelta
from pathlib import Path
import pendulum
from airflow.sdk import DAG, ExceptionRetryPolicy, RetryRule, task

MARK = Path(__file__).with_name("failed-once")

with DAG("retry_soon", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    @task(retries=2, retry_delay=timedelta(days=1),
          retry_policy=ExceptionRetryPolicy(rules=[RetryRule(exception=ConnectionError,
                                                             retry_delay=timedelta(seconds=0))]))
    def flaky():
        if not MARK.exists():
            MARK.write_text("x")
            raise ConnectionError("rate limited")
        return "done"

    flaky()
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunState, str]]:
    folder = tmp_path_factory.mktemp("retry") / "dags"
    folder.mkdir()
    (folder / "policies.py").write_text(POLICIES)
    found = load_file(str(folder / "policies.py"), str(folder))
    assert found.error is None, found.error
    [dag] = found.dags
    lines: list[str] = []
    run = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)  # type: ignore[arg-type]
    yield local_testing.test_dag(run, lines.append), "\n".join(lines)


def tries(log: str, task_id: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith(f"--- {task_id} try ")]


def test_a_rule_that_fails_ends_the_task_at_its_first_try_without_its_retries(ran: tuple[RunState, str]) -> None:
    state, log = ran
    assert state is RunState.FAILED
    assert tries(log, "key_error") == ["--- key_error try 1: failed (no retry: KeyError: 'k')"]
    assert "Retry policy decision: fail (bad input, not retryable)" in log


def test_a_rule_that_retries_names_its_delay_and_stays_within_the_tasks_retries(ran: tuple[RunState, str]) -> None:
    _state, log = ran
    assert tries(log, "index_error") == [f"--- index_error try {n}: up_for_retry (retry in 0 s: IndexError: i)"
                                         for n in (1, 2, 3)] + [
        "--- index_error try 4: failed (retry in 0 s: IndexError: i)"]


def test_no_matching_rule_a_default_decision_or_a_broken_policy_leave_the_tasks_own_retries(
        ran: tuple[RunState, str]) -> None:
    _state, log = ran
    assert [t.split(": ", 1)[1] for t in tries(log, "no_rule")] == ["up_for_retry (ValueError: v)"] * 3 + [
        "failed (ValueError: v)"]
    assert tries(log, "own") == ["--- own try 1: up_for_retry (ValueError: o)",
                                 "--- own try 2: failed (no retry: ValueError: o)"]
    assert len(tries(log, "broken")) == 4
    assert "Retry policy evaluation failed, falling back to default behaviour" in log


def test_a_policy_that_is_not_a_retry_policy_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(POLICIES.replace("@task(retry_policy=POLICY)\n    def key_error",
                                                      "@task(retry_policy={'retries': 1})\n    def key_error"))
    error = load_file(str(tmp_path / "bad.py"), str(tmp_path)).error
    assert error is not None and error.strip().splitlines()[-1].endswith(
        "task 'key_error': retry_policy must be a RetryPolicy (ExceptionRetryPolicy or a subclass of RetryPolicy), "
        "not dict")


def test_the_delay_a_reason_names_is_the_retrys() -> None:
    assert retry_delay("retry in 30 s: IndexError: i", 300.0) == 30.0
    assert retry_delay("retry in 0.5 s: x", 300.0) == 0.5
    assert retry_delay("IndexError: retry in 30 s: i", 300.0) == 300.0
    assert retry_delay(None, 7.0) == 7.0


def test_the_scheduler_retries_after_the_rules_delay_instead_of_the_tasks(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    (cli.dags / "retry_soon.py").write_text(SCHEDULED)
    cli.ok("trigger", "retry_soon")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")  # (a day's delay would keep it waiting)
    [run] = cli.json("timeline", "retry_soon")
    assert run["state"] == "success"
    shown: dict[str, Any] = cli.json("runs", "show", str(run["run_id"]))
    [ti] = shown["task_instances"]
    assert ti["state"] == "success" and ti["try_number"] == 2
