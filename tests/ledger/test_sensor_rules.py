"""Sensor rules without a database or a real clock (ledger/sdk/sensors.py): when the next check is, when the timeout
passes (counted from the first check, across reschedules), soft_fail, and what each try records."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
import pytest

from ledger import DAG
from ledger.core.errors import RescheduleTask, SensorTimeout, SkipTask
from ledger.infra.clock import FixedClock
from ledger.sdk.context import TaskContext
from ledger.sdk.sensors import (
    SENSOR_KEY,
    PokeReturnValue,
    PythonSensor,
    TimeSensor,
    Timing,
    check_until_done,
    continued,
    next_delay,
    reschedule_at,
    timed_out,
)

START = pendulum.datetime(2024, 3, 1, 9, tz="UTC")


@pytest.mark.parametrize(("timing", "checks", "waited", "expected"), [
    pytest.param(Timing(60, 3600), 1, 0, 60, id="every-poke-interval"),
    pytest.param(Timing(60, 3600), 5, 3590, 10, id="never-past-the-timeout"),
    pytest.param(Timing(10, 3600, exponential_backoff=True), 4, 70, 80, id="exponential"),
    pytest.param(Timing(10, 3600, exponential_backoff=True, max_wait=30), 4, 70, 30, id="max_wait-caps-it"),
])
def test_the_next_check_comes_after_the_poke_interval(timing: Timing, checks: int, waited: float,
                                                      expected: float) -> None:
    assert next_delay(timing, checks, waited) == expected


def test_the_timeout_counts_from_the_first_check() -> None:
    assert not timed_out(Timing(60, 300), 299.9)
    assert timed_out(Timing(60, 300), 300)


def test_only_the_try_right_after_a_reschedule_continues_the_sequence() -> None:
    record = {"state": "rescheduled", "try": 3, "first_check": START.isoformat(), "checks": 4}
    assert continued(record, 4) == (START.isoformat(), 4)
    assert continued(record, 5) is None  # a try after another (a retry after a failure) starts again
    assert continued({**record, "state": "done"}, 4) is None
    assert continued(None, 1) is None
    assert reschedule_at({**record, "next_check": "2024-03-01T09:05:00+00:00"}) == START.add(minutes=5)


def context(try_number: int = 1, values: dict[str, Any] | None = None) -> TaskContext:
    return TaskContext(dag_id="d", task_id="wait", run_id="1", logical_date=START, data_interval_start=START,
                       data_interval_end=START, try_number=try_number, dag_version="v", run_type="manual",
                       xcom_values=values or {})


def sensor(results: list[Any], **kwargs: Any) -> tuple[PythonSensor, FixedClock, list[float]]:
    with DAG("d", start_date=START):
        made = PythonSensor("wait", python_callable=lambda: None, **kwargs)
    clock, slept = FixedClock(START), []
    answers = iter(results)
    made.clock = clock

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds=seconds)

    made.sleep = sleep  # type: ignore[method-assign]
    made.poke = lambda ctx: next(answers)  # type: ignore[method-assign]
    return made, clock, slept


def test_poke_mode_checks_in_one_try_until_the_condition_holds() -> None:
    made, _clock, slept = sensor([False, False, PokeReturnValue(True, xcom_value="found")], poke_interval=30)
    ctx = context()
    assert check_until_done(made, ctx, made.poke) == "found"
    assert slept == [30, 30]
    assert ctx.xcom_values["wait"][SENSOR_KEY]["checks"] == 3


def test_poke_mode_fails_without_retry_at_the_timeout_and_soft_fail_skips() -> None:
    made, _clock, slept = sensor([False] * 10, poke_interval=30, timeout=60)
    with pytest.raises(SensorTimeout, match="after 60 s and 3 check"):
        check_until_done(made, context(), made.poke)
    assert slept == [30, 30]
    soft, _clock, _slept = sensor([False] * 10, poke_interval=30, timeout=60, soft_fail=True)
    with pytest.raises(SkipTask, match="soft_fail"):
        check_until_done(soft, context(), soft.poke)


def test_reschedule_mode_ends_the_try_and_the_next_try_keeps_the_first_check_time() -> None:
    made, clock, slept = sensor([False, False, False], poke_interval=100, timeout=250, mode="reschedule")
    first = context(try_number=1)
    with pytest.raises(RescheduleTask) as raised:
        check_until_done(made, first, made.poke)
    assert raised.value.at == START.add(seconds=100) and slept == []  # no sleeping in the worker
    record = first.xcom_values["wait"][SENSOR_KEY]
    assert record == {"state": "rescheduled", "try": 1, "first_check": START.isoformat(), "checks": 1,
                      "mode": "reschedule", "next_check": START.add(seconds=100).isoformat()}
    clock.current = START.add(seconds=100)
    second = context(try_number=2, values={"wait": {SENSOR_KEY: record}})
    with pytest.raises(RescheduleTask) as raised:
        check_until_done(made, second, made.poke)
    assert raised.value.at == START.add(seconds=200)
    clock.current = START.add(seconds=250)  # the third check is at the timeout, counted from the first check
    third = context(try_number=3, values={"wait": second.xcom_values["wait"]})
    with pytest.raises(SensorTimeout, match="after 250 s and 3 check"):
        check_until_done(made, third, made.poke)


def test_a_deferred_time_sensor_is_checked_again_when_its_time_comes() -> None:
    with DAG("d", start_date=START):
        made = TimeSensor("wait", target_time=dt.time(9, 0, 5), poke_interval=60, deferrable=True)
    made.clock = FixedClock(START)
    assert made.mode == "reschedule"
    with pytest.raises(RescheduleTask) as raised:
        check_until_done(made, context(), made.poke)
    assert raised.value.at == START.add(seconds=5, microseconds=1)



def checks(*answers: bool | Exception) -> Any:
    """A poke giving each answer in turn, raising those that are exceptions."""
    left = iter(answers)

    def poke(ctx: TaskContext) -> bool:
        answer = next(left)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return poke


def test_with_silent_fail_a_check_that_raises_counts_as_not_yet_and_the_sensor_checks_again() -> None:
    made, _clock, slept = sensor([], poke_interval=30, silent_fail=True)
    made.poke = checks(False, ConnectionError("the bucket did not answer"), True)  # type: ignore[method-assign]
    assert check_until_done(made, context(), made.poke) is None
    assert slept == [30, 30]
    assert made.settings()["sensor"]["silent_fail"] is True


def test_without_silent_fail_a_check_that_raises_fails_the_try_and_silent_fail_never_hides_a_skip() -> None:
    made, _clock, _slept = sensor([], poke_interval=30)
    made.poke = checks(ConnectionError("down"))  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        check_until_done(made, context(), made.poke)
    assert "silent_fail" not in made.settings()["sensor"]  # (a version made without it is the same version)
    quiet, _clock, _slept = sensor([], poke_interval=30, silent_fail=True)
    quiet.poke = checks(SkipTask("nothing to wait for"))  # type: ignore[method-assign]
    with pytest.raises(SkipTask):
        check_until_done(quiet, context(), quiet.poke)
