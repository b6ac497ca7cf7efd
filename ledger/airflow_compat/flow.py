"""Airflow's branching operators and sensors on ledger's (ledger/sdk/branching.py, ledger/sdk/sensors.py,
ledger/sdk/external_task.py), taking Airflow's BaseOperator arguments as every operator of the namespace does
(ledger/airflow_compat/operators.py): BranchPythonOperator, ShortCircuitOperator, BranchDateTimeOperator,
BranchDayOfWeekOperator, BaseBranchOperator, LatestOnlyOperator, BaseSensorOperator, the Python, Bash, time, date,
weekday, file and external-task sensors (and their `*Async` forms), ExternalTaskMarker.

Subclasses of BaseBranchOperator and BaseSensorOperator get Airflow's context (a dict of the template names) in
`choose_branch(context)` and `poke(context)`, as `execute(context)` does in BaseOperator's.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import pendulum

from ledger.airflow_compat.operators import AirflowArgs, BaseOperator, PythonOperator, _make
from ledger.sdk import branching, external_task, sensors
from ledger.sdk import dag as ledger_dag
from ledger.sdk.context import TaskContext


def _own_args(base: type) -> set[str]:
    """The keyword arguments the ledger task class `base` (and its bases up to Task) takes itself."""
    names: set[str] = set()
    for cls in base.__mro__:
        if cls is ledger_dag.Task:
            break
        init = cls.__dict__.get("__init__")
        if init is not None:
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names - {"self", "task_id"}


class LedgerOperator(AirflowArgs):
    """An Airflow operator that is a ledger task class (the next in its class's bases): the class's own arguments
    go to it, Airflow's BaseOperator arguments are taken as every operator takes them."""

    def __init__(self, *, task_id: str | None = None, **kwargs: Any) -> None:
        base = next(c for c in type(self).__mro__
                    if issubclass(c, ledger_dag.Task) and not issubclass(c, AirflowArgs))
        own_names = _own_args(base)
        own = {k: kwargs.pop(k) for k in list(kwargs) if k in own_names}
        _make(self, base, task_id, kwargs, own)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), **self.airflow_settings()}  # type: ignore[misc]


# -- branching -------------------------------------------------------------------------------------------

class BranchPythonOperator(PythonOperator, branching.BranchPythonTask):
    """Airflow's BranchPythonOperator: the callable returns the task id(s) to follow."""


class ShortCircuitOperator(PythonOperator, branching.ShortCircuitTask):
    """Airflow's ShortCircuitOperator: a falsy result skips the tasks downstream (all of them with
    `ignore_downstream_trigger_rules=True`, the default; else the direct ones, the trigger rules deciding the
    rest)."""

    def __init__(self, *, ignore_downstream_trigger_rules: bool = True, **kwargs: Any) -> None:
        self.ignore_downstream_trigger_rules = bool(ignore_downstream_trigger_rules)
        super().__init__(**kwargs)


class BranchDateTimeOperator(LedgerOperator, branching.BranchDateTimeTask):
    """Airflow's BranchDateTimeOperator."""


class BranchDayOfWeekOperator(LedgerOperator, branching.BranchDayOfWeekTask):
    """Airflow's BranchDayOfWeekOperator."""


class BaseBranchOperator(BaseOperator, branching.BaseBranchTask):
    """Airflow's BaseBranchOperator: subclass it and write `choose_branch(self, context)` (Airflow's context)."""

    def execute(self, context: Mapping[str, Any]) -> Any:  # type: ignore[override]
        chosen = self.choose_branch(context)  # type: ignore[arg-type]
        print(f"[ledger] {branching.record_choice(self, context['ti'], chosen)}", flush=True)
        return chosen


class LatestOnlyOperator(BaseBranchOperator):
    """Airflow's LatestOnlyOperator, a branch as in Airflow: it succeeds, following all its direct downstream
    tasks when its run is the latest (`branching.is_latest`: now within the window from the end of the run's data
    interval to the end of the next one) or was not made by the schedule (a manual or triggered run), and none of
    them otherwise, so that they are skipped and their trigger rules spread the skip."""

    def choose_branch(self, context: Mapping[str, Any]) -> list[str]:  # type: ignore[override]
        downstream = sorted(self.downstream_ids)
        if context.get("run_type") == "manual":
            self.log.info("a manual run: not skipping")
            return downstream
        end = pendulum.instance(context["data_interval_end"])
        try:
            right = pendulum.instance(self.dag.schedule.interval_for(end).end)
        except Exception:  # no schedule, or no interval after this one: the latest there is
            return downstream
        now = pendulum.now("UTC")
        if branching.is_latest(end, right, now):
            return downstream
        self.log.info("not the latest run: now (%s) is outside %s to %s; skipping %s", now.isoformat(),
                      end.isoformat(), right.isoformat(), ", ".join(downstream) or "nothing")
        return []


# -- sensors ---------------------------------------------------------------------------------------------

class BaseSensorOperator(BaseOperator, sensors.BaseSensor):  # type: ignore[misc]
    """Airflow's BaseSensorOperator: subclass it and write `poke(self, context)` (Airflow's context), returning
    True or a PokeReturnValue once the condition holds; poke_interval, timeout, mode, soft_fail... as ledger's
    sensors take them (ledger/sdk/sensors.py)."""

    kind = "sensor"

    def __init__(self, *, task_id: str | None = None, **kwargs: Any) -> None:
        own_names = _own_args(sensors.BaseSensor)
        own = {k: kwargs.pop(k) for k in list(kwargs) if k in own_names}
        _make(self, sensors.BaseSensor, task_id, kwargs, own)
        self._base_names = set(vars(self))

    def poke_airflow(self, context: TaskContext, names: Mapping[str, Any]) -> Any:
        """One check (the task runner calls it): poke() with Airflow's context."""
        return self.poke(self.context_for(context, names))  # type: ignore[arg-type]


class PythonSensor(LedgerOperator, sensors.PythonSensor):
    """Airflow's PythonSensor (and `@task.sensor`)."""


class BashSensor(LedgerOperator, sensors.BashSensor):
    """Airflow's BashSensor."""


class TimeSensor(LedgerOperator, sensors.TimeSensor):
    """Airflow's TimeSensor."""


class TimeSensorAsync(LedgerOperator, sensors.TimeSensorAsync):
    """Airflow's TimeSensorAsync."""


class TimeDeltaSensor(LedgerOperator, sensors.TimeDeltaSensor):
    """Airflow's TimeDeltaSensor."""


class TimeDeltaSensorAsync(LedgerOperator, sensors.TimeDeltaSensorAsync):
    """Airflow's TimeDeltaSensorAsync."""


class DateTimeSensor(LedgerOperator, sensors.DateTimeSensor):
    """Airflow's DateTimeSensor."""


class DateTimeSensorAsync(LedgerOperator, sensors.DateTimeSensorAsync):
    """Airflow's DateTimeSensorAsync."""


class DayOfWeekSensor(LedgerOperator, sensors.DayOfWeekSensor):
    """Airflow's DayOfWeekSensor."""


class FileSensor(LedgerOperator, sensors.FileSensor):
    """Airflow's FileSensor."""


class ExternalTaskSensor(LedgerOperator, external_task.ExternalTaskSensor):
    """Airflow's ExternalTaskSensor."""


class ExternalTaskMarker(LedgerOperator, external_task.ExternalTaskMarker):
    """Airflow's ExternalTaskMarker."""

