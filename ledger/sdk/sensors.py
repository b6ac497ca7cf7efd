"""Sensors: tasks that wait for a condition, checking it every `poke_interval` seconds, as Airflow's.

    wait = PythonSensor("wait_for_file", python_callable=lambda: os.path.exists("/data/in.csv"),
                        poke_interval=30, timeout=3600, mode="reschedule")

* `mode="poke"` (the default) checks inside one try, sleeping between checks: the try holds its worker slot.
* `mode="reschedule"` checks once per try; when the condition does not hold, the try ends `up_for_reschedule`
  and the scheduler queues the next try at the next check time, spending no retry: nothing holds a worker slot
  meanwhile. `deferrable=True` (and the `*Async` sensors) run the same way (ledger has no triggerer), and a
  sensor that knows when its condition will hold (a time, a date) is checked again at that moment.
* `timeout` (seconds or a timedelta; default 7 days) counts from the first check of the try sequence, across
  reschedules; when it passes the task fails without retries (SensorTimeout), or is skipped with `soft_fail`.
* Each try records what it checked as its value `ledger.sensor` (first check, checks made, the next check), which
  the scheduler turns into a `sensor_checked` event and the next try of a reschedule continues from.

The rules (when the next check is, whether the timeout passed, whether a try continues the sequence) are pure
functions of the values, tested without a database or a clock.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pendulum

from ledger.core.errors import DagDefinitionError, FailWithoutRetry, RescheduleTask, SensorTimeout, SkipTask
from ledger.infra.clock import Clock, SystemClock
from ledger.sdk.branching import WeekDay, branch_task, decorator, short_circuit_task
from ledger.sdk.dag import Task, _as_ref, _callable_definition, _jsonable, after_values

if TYPE_CHECKING:
    from ledger.sdk.context import TaskContext

SENSOR_KEY = "ledger.sensor"
MODES = ("poke", "reschedule")
DEFAULT_TIMEOUT = 7 * 24 * 3600.0
MAX_RECORDED_CHECKS = 100  # a poke try records when its last this many unmet checks were (each an event)


@dataclass(frozen=True, slots=True)
class PokeReturnValue:
    """What a sensor's check may return (Airflow's): whether it is done, and the value to pass on when it is."""

    is_done: bool
    xcom_value: Any = None

    def __bool__(self) -> bool:
        return self.is_done


# -- the rules -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Timing:
    poke_interval: float
    timeout: float
    exponential_backoff: bool = False
    max_wait: float | None = None


def next_delay(timing: Timing, checks: int, waited: float) -> float:
    """Seconds until the next check, after `checks` checks and `waited` seconds since the first: poke_interval,
    or with exponential_backoff poke_interval * 2^(checks - 1) (without Airflow's jitter: the next check time is
    recorded and should be what happens), at most max_wait, and never past the timeout (the last check is at
    the timeout)."""
    delay = timing.poke_interval * (2 ** max(0, checks - 1) if timing.exponential_backoff else 1)
    if timing.max_wait is not None:
        delay = min(delay, timing.max_wait)
    return max(0.0, min(delay, timing.timeout - waited))


def timed_out(timing: Timing, waited: float) -> bool:
    """Whether a sensor that has waited `waited` seconds since its first check (and whose check just failed) is
    past its timeout."""
    return waited >= timing.timeout


def continued(record: Any, try_number: int) -> tuple[str, int] | None:
    """(first check ISO time, checks made) when try `try_number` continues a reschedule sequence: the previous
    try's record says it asked for a reschedule. None: this try begins a new sequence (its first try, a retry
    after a failure, a run after success)."""
    if not isinstance(record, Mapping) or record.get("state") != "rescheduled" or record.get("try") != try_number - 1:
        return None
    first, checks = record.get("first_check"), record.get("checks")
    if not isinstance(first, str) or not isinstance(checks, int):
        return None
    return first, checks


def reschedule_at(record: Any) -> dt.datetime | None:
    """When a rescheduled try asked to be checked again, from the record it left (None: no such record)."""
    if isinstance(record, Mapping) and record.get("state") == "rescheduled" and isinstance(record.get("next_check"),
                                                                                           str):
        parsed = pendulum.parse(record["next_check"])
        if isinstance(parsed, dt.datetime):
            return parsed
    return None


def _seconds(value: float | dt.timedelta | None, name: str, task_id: str, *, default: float | None) -> float | None:
    if value is None:
        return default
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise DagDefinitionError(f"task {task_id!r}: {name} must be a non-negative number of seconds or a "
                                 f"timedelta, not {value!r:.60}")
    return float(seconds)


# -- the base sensor -------------------------------------------------------------------------------------------

class BaseSensor(Task):
    """A task that checks a condition (`poke(context)`, True or a PokeReturnValue when it holds) until it holds."""

    kind = "sensor"
    clock: Clock = SystemClock()
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def __init__(self, task_id: str, *, poke_interval: float | dt.timedelta = 60.0,
                 timeout: float | dt.timedelta | None = None, mode: str = "poke", soft_fail: bool = False,
                 exponential_backoff: bool = False, max_wait: float | dt.timedelta | None = None,
                 deferrable: bool = False, silent_fail: bool = False, **kwargs: Any) -> None:
        interval = _seconds(poke_interval, "poke_interval", task_id, default=60.0)
        assert interval is not None
        self.timing = Timing(interval, _seconds(timeout, "timeout", task_id, default=DEFAULT_TIMEOUT) or 0.0,
                             bool(exponential_backoff), _seconds(max_wait, "max_wait", task_id, default=None))
        if mode not in MODES:
            raise DagDefinitionError(f"task {task_id!r}: mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.deferrable = bool(deferrable)
        self.mode = "reschedule" if self.deferrable else mode
        self.soft_fail = bool(soft_fail)
        self.silent_fail = bool(silent_fail)
        super().__init__(task_id, **kwargs)

    @property
    def poke_interval(self) -> float:
        return self.timing.poke_interval

    @property
    def timeout(self) -> float:
        return self.timing.timeout

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "sensor": {
            "mode": self.mode, "poke_interval": self.timing.poke_interval, "timeout": self.timing.timeout,
            "soft_fail": self.soft_fail, "exponential_backoff": self.timing.exponential_backoff,
            "max_wait": self.timing.max_wait, "deferrable": self.deferrable,
            **({"silent_fail": True} if self.silent_fail else {})}}  # (absent when off: versions stay as they were)

    def poke(self, context: TaskContext) -> bool | PokeReturnValue:
        raise NotImplementedError(f"{type(self).__name__} must define poke(context)")

    def ready_at(self, context: TaskContext) -> dt.datetime | None:
        """When the condition will hold, for a sensor that knows (a time, a date): a deferred check waits until
        then rather than a poke interval. None: not known."""
        return None

    def execute(self, context: TaskContext) -> Any:
        return check_until_done(self, context, self.poke)


def check_until_done(sensor: BaseSensor, context: TaskContext,
                     check: Callable[[TaskContext], bool | PokeReturnValue]) -> Any:
    """Run a sensor's checks for one try: returns the value to pass on once the condition holds; raises
    RescheduleTask (reschedule mode, not yet), SensorTimeout, or SkipTask (soft_fail) when the timeout passed."""
    label = context.task_id if context.map_index < 0 else f"{context.task_id}[{context.map_index}]"
    before = continued(context.xcom_values.get(label, {}).get(SENSOR_KEY), context.try_number)
    now = sensor.clock.now()
    first = pendulum.parse(before[0]) if before is not None else now
    assert isinstance(first, dt.datetime)
    checks = before[1] if before is not None else 0
    timing = sensor.timing
    waiting: list[str] = []  # when this try's earlier checks (poke mode) found the condition not met

    def record(state: str, next_check: dt.datetime | None = None) -> None:
        context.xcom_push(SENSOR_KEY, {"state": state, "try": context.try_number, "first_check": first.isoformat(),
                                       "checks": checks, "mode": sensor.mode,
                                       **({"next_check": next_check.isoformat()} if next_check else {}),
                                       **({"not_met_at": waiting[-MAX_RECORDED_CHECKS:]} if waiting else {})})

    while True:
        checks += 1
        try:
            result = check(context)
        except (SkipTask, FailWithoutRetry, RescheduleTask):  # what a check says of the task itself
            raise
        except Exception as exc:
            if not sensor.silent_fail:
                raise
            print(f"[ledger] sensor check {checks}: {type(exc).__name__}: {exc}; silent_fail counts it as not yet",
                  flush=True)
            result = False
        now = sensor.clock.now()
        waited = (now - first).total_seconds()
        if result:
            record("done")
            print(f"[ledger] sensor check {checks}: the condition holds", flush=True)
            return result.xcom_value if isinstance(result, PokeReturnValue) else None
        if timed_out(timing, waited):
            record("timed_out")
            message = f"sensor timed out after {waited:g} s and {checks} check(s) (timeout {timing.timeout:g} s)"
            if sensor.soft_fail:
                raise SkipTask(message + "; soft_fail skips it")
            raise SensorTimeout(message)
        delay = next_delay(timing, checks, waited)
        at = now + dt.timedelta(seconds=delay)
        known = sensor.ready_at(context) if sensor.deferrable else None
        if known is not None and now < known < at:
            at = known
        print(f"[ledger] sensor check {checks}: not yet; next check at {at.isoformat()}", flush=True)
        if sensor.mode == "reschedule":
            record("rescheduled", at)
            raise RescheduleTask(at)
        waiting.append(now.isoformat())
        sensor.sleep(max(0.0, (at - now).total_seconds()))


# -- the sensors -----------------------------------------------------------------------------------------------

class PythonSensor(BaseSensor):
    """Checks by calling `python_callable` (with op_args, op_kwargs and the Airflow context names it asks for);
    a truthy result, or a PokeReturnValue that is done, ends the wait (Airflow's PythonSensor, `@task.sensor`)."""

    template_fields = ("op_args", "op_kwargs", "templates_dict")

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *, op_args: Sequence[Any] = (),
                 op_kwargs: Mapping[str, Any] | None = None, templates_dict: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        if not callable(python_callable):
            raise DagDefinitionError(f"task {task_id!r}: python_callable must be callable")
        self.python_callable = python_callable
        self.op_args = [_as_ref(a) for a in op_args]
        self.op_kwargs = {k: _as_ref(v) for k, v in (op_kwargs or {}).items()}
        self.templates_dict = dict(templates_dict or {})
        super().__init__(task_id, **kwargs)
        after_values(self, [self.op_args, self.op_kwargs])

    def definition(self) -> dict[str, Any]:
        return {**_callable_definition(self.python_callable), "op_args": _jsonable(self.op_args),
                "op_kwargs": _jsonable(self.op_kwargs),
                **({"templates_dict": _jsonable(self.templates_dict)} if self.templates_dict else {})}


class BashSensor(BaseSensor):
    """Checks by running `bash_command`: exit code 0 ends the wait; with `retry_exit_code`, any other code than
    that one fails the task (Airflow's BashSensor)."""

    template_fields = ("bash_command", "env")

    def __init__(self, task_id: str, bash_command: str, *, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, retry_exit_code: int | None = None, **kwargs: Any) -> None:
        if not isinstance(bash_command, str) or not bash_command.strip():
            raise DagDefinitionError(f"task {task_id!r}: bash_command must be a non-empty string")
        self.bash_command, self.env, self.cwd = bash_command, dict(env or {}), cwd
        self.retry_exit_code = retry_exit_code
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"bash_command": self.bash_command, "env": _jsonable(self.env), "cwd": self.cwd,
                "retry_exit_code": self.retry_exit_code}

    def poke(self, context: TaskContext) -> bool:
        env = {**os.environ, **context.env(), **self.env}
        code = subprocess.call(["bash", "-c", self.bash_command], env=env, cwd=self.cwd, stdin=subprocess.DEVNULL)
        if code == 0:
            return True
        if self.retry_exit_code is not None and code != self.retry_exit_code:
            raise RuntimeError(f"bash_command exited with {code}, not the retry_exit_code {self.retry_exit_code}")
        return False


def _aware(value: dt.datetime, tz: str) -> pendulum.DateTime:
    """A datetime as an aware one: a naive one is in the DAG's timezone."""
    if value.tzinfo is None:
        return pendulum.instance(value, tz=tz)
    return pendulum.instance(value)


class _KnownTimeSensor(BaseSensor):
    """A sensor whose condition is a moment: done once now is past it; deferred, it checks again at that
    moment."""

    def target(self, context: TaskContext) -> dt.datetime:
        raise NotImplementedError

    def poke(self, context: TaskContext) -> bool:
        return self.clock.now() > self.target(context)

    def ready_at(self, context: TaskContext) -> dt.datetime | None:
        return self.target(context) + dt.timedelta(microseconds=1)


class TimeSensor(_KnownTimeSensor):
    """Waits until a time of day (in the DAG's timezone) on the day it checks (Airflow's TimeSensor)."""

    def __init__(self, task_id: str, *, target_time: dt.time, **kwargs: Any) -> None:
        if not isinstance(target_time, dt.time):
            raise DagDefinitionError(f"task {task_id!r}: target_time must be a datetime.time")
        self.target_time = target_time
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"target_time": self.target_time.isoformat()}

    def target(self, context: TaskContext) -> dt.datetime:
        today = self.clock.now().in_timezone(self.dag.timezone).date()
        return _aware(dt.datetime.combine(today, self.target_time.replace(tzinfo=None)), self.dag.timezone)


class TimeDeltaSensor(_KnownTimeSensor):
    """Waits until `delta` after the run's data interval end (Airflow's TimeDeltaSensor)."""

    def __init__(self, task_id: str, *, delta: dt.timedelta, **kwargs: Any) -> None:
        if not isinstance(delta, dt.timedelta):
            raise DagDefinitionError(f"task {task_id!r}: delta must be a timedelta")
        self.delta = delta
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"delta": self.delta.total_seconds()}

    def target(self, context: TaskContext) -> dt.datetime:
        return pendulum.instance(context.data_interval_end) + self.delta


class DateTimeSensor(_KnownTimeSensor):
    """Waits until a datetime: a datetime or a templated ISO string (`"{{ data_interval_end }}"`); naive in the
    DAG's timezone (Airflow's DateTimeSensor)."""

    template_fields = ("target_time",)

    def __init__(self, task_id: str, *, target_time: str | dt.datetime, **kwargs: Any) -> None:
        if not isinstance(target_time, (str, dt.datetime)):
            raise DagDefinitionError(f"task {task_id!r}: target_time must be a datetime or an ISO string")
        self.target_time: str = target_time.isoformat() if isinstance(target_time, dt.datetime) else target_time
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"target_time": self.target_time}

    def target(self, context: TaskContext) -> dt.datetime:
        parsed = pendulum.parse(str(self.target_time), tz=self.dag.timezone)
        if not isinstance(parsed, dt.datetime):
            raise ValueError(f"target_time {self.target_time!r} is not a datetime")
        return parsed


class DayOfWeekSensor(BaseSensor):
    """Waits until a day of the week (names or WeekDay members; in the DAG's timezone), of now or of the logical
    date with `use_task_logical_date` (Airflow's DayOfWeekSensor)."""

    def __init__(self, task_id: str, *, week_day: str | WeekDay | Iterable[str | WeekDay],
                 use_task_logical_date: bool = False, **kwargs: Any) -> None:
        try:
            self.week_day = sorted(WeekDay.validate_week_day(week_day))
        except (AttributeError, TypeError) as exc:
            raise DagDefinitionError(f"task {task_id!r}: {exc}") from None
        self.use_task_logical_date = bool(kwargs.pop("use_task_execution_day", use_task_logical_date))
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"week_day": self.week_day, "use_task_logical_date": self.use_task_logical_date}

    def poke(self, context: TaskContext) -> bool:
        at = pendulum.instance(context.logical_date) if self.use_task_logical_date else self.clock.now()
        return at.in_timezone(self.dag.timezone).isoweekday() in self.week_day


class FileSensor(BaseSensor):
    """Waits until a file, or a folder with a file in it, matches `filepath` (a glob; `recursive` lets `**` match
    folders), as Airflow's FileSensor. `fs_conn_id` is accepted; paths are used as given."""

    template_fields = ("filepath",)

    def __init__(self, task_id: str, *, filepath: str, fs_conn_id: str = "fs_default", recursive: bool = False,
                 **kwargs: Any) -> None:
        if not isinstance(filepath, str) or not filepath:
            raise DagDefinitionError(f"task {task_id!r}: filepath must be a non-empty string")
        self.filepath, self.fs_conn_id, self.recursive = filepath, fs_conn_id, bool(recursive)
        super().__init__(task_id, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {"filepath": self.filepath, "fs_conn_id": self.fs_conn_id, "recursive": self.recursive}

    def poke(self, context: TaskContext) -> bool:
        for path in glob.glob(self.filepath, recursive=self.recursive):
            if os.path.isfile(path):
                return True
            if any(files for _root, _dirs, files in os.walk(path)):
                return True
        return False


class _Deferred:
    """The `*Async` forms: deferrable by default (ledger runs them in reschedule mode, checked again when their
    moment comes)."""

    def __init__(self, task_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("deferrable", True)
        super().__init__(task_id, **kwargs)  # type: ignore[call-arg]


class TimeSensorAsync(_Deferred, TimeSensor):
    """TimeSensor, deferred."""


class TimeDeltaSensorAsync(_Deferred, TimeDeltaSensor):
    """TimeDeltaSensor, deferred."""


class DateTimeSensorAsync(_Deferred, DateTimeSensor):
    """DateTimeSensor, deferred."""


def register_decorators(task: Any) -> None:
    """`@task.branch`, `@task.short_circuit` and `@task.sensor` as attributes of the `@task` decorator."""
    task.branch = branch_task
    task.short_circuit = short_circuit_task
    task.sensor = decorator(PythonSensor)


__all__ = ["SENSOR_KEY", "BaseSensor", "BashSensor", "DateTimeSensor", "DateTimeSensorAsync", "DayOfWeekSensor",
           "FileSensor", "PokeReturnValue", "PythonSensor", "TimeDeltaSensor", "TimeDeltaSensorAsync", "TimeSensor",
           "TimeSensorAsync", "Timing", "check_until_done",
           "continued", "next_delay", "reschedule_at", "timed_out"]
