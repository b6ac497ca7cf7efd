"""Airflow's callback context: an `on_failure_callback` (or success, retry) of an Airflow DAG or operator is called
with the context Airflow gives it, `context["ti"]`, `context["task_instance"]`, `context["exception"]`, `ds`, `dag`,
`task`, `params`, ..., beside what ledger tells every callback (state, reason, run_id, ...).

ledger records a callback as it is and makes the call in a process of its own from the version's code with a JSON
context (scheduler/callbacks/runner.py). An Airflow operator's function is kept wrapped (`functools.wraps`: the
version records the function itself, by its name and source) by a wrapper that turns that JSON into Airflow's
context when it is called. A try's exception does not cross processes: `exception` is an AirflowException whose
message is the try's reason (`exit code 3`, `ValueError: ...`), None when the try did not fail.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pendulum

from ledger.airflow_compat.graph import AirflowException
from ledger.sdk.context import log_url
from ledger.sdk.params import resolve as resolve_params
from ledger.sdk.templates import template_names

# the kinds of callbacks whose functions get Airflow's context (a deadline's has Airflow's own arguments)
AIRFLOW_KINDS = ("task_failure", "task_success", "task_retry", "run_failure", "run_success")
FAILED_STATES = ("failed", "up_for_retry")


class CallbackTaskInstance(SimpleNamespace):
    """`context["ti"]` in a callback: the task instance's facts as the ledger recorded its try (dag_id, task_id,
    run_id, try_number, state, map_index, task, operator, execution_date, start_date, end_date, duration, hostname,
    max_tries, log_url; a fact the ledger does not hold is None). Its values are not pulled: `xcom_pull` says so in
    one line."""

    def xcom_pull(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a callback's ti does not pull values in ledger: read them in the task, or from "
                           "`ledger runs show` (docs/from-airflow.md)")


def callback_context(context: Mapping[str, Any], dag: Any, task: Any) -> dict[str, Any]:
    """Airflow's context for a callback of `dag` (of its task `task`, None for a DAG's) from ledger's JSON one."""
    task_id = context.get("task_id")
    if task is None and task_id and dag is not None:
        task = dag.tasks.get(task_id)
    state, reason = context.get("state"), context.get("reason")
    at = pendulum.parse(str(context["logical_date"]))
    ti = _task_instance(context, task, at)
    run_started, run_ended = context.get("run_started"), context.get("run_ended")
    names = template_names(
        logical_date=at, data_interval_start=pendulum.parse(str(context.get("data_interval_start") or at)),  # type: ignore[arg-type]
        data_interval_end=pendulum.parse(str(context.get("data_interval_end") or at)),  # type: ignore[arg-type]
        prev_interval=None, run_id=str(context.get("run_id")), run_type=str(context.get("run_type") or ""),
        try_number=int(context.get("try_number") or 0), dag_version=str(context.get("dag_version") or ""),
        dag=dag, task=task, params=resolve_params(getattr(dag, "params", None) or {}, context.get("conf")),
        conf=context.get("conf") or {}, ti=ti, run_started=run_started, run_ended=run_ended,
        run_state=str(context.get("run_state") or state or ""))
    failed = state in FAILED_STATES or context.get("kind") == "run_failure"
    return {**context, **names, "ti": ti, "task_instance": ti, "reason": reason,
            "exception": AirflowException(reason or state) if failed else None}


def _task_instance(context: Mapping[str, Any], task: Any, at: Any) -> CallbackTaskInstance:
    """The task instance of a task callback's try, from what its context recorded of the try (`try`); a run
    callback's has only the run's facts."""
    facts = context.get("try") or {}
    started, ended = (pendulum.instance(dt.datetime.fromisoformat(facts[k])) if facts.get(k) else None
                      for k in ("start_date", "end_date"))
    allowed = facts.get("max_tries")
    run_id, try_number = context.get("run_id"), context.get("try_number")
    map_index = int(facts.get("map_index", -1))
    task_id = context.get("task_id")
    url = log_url(run_id, task_id, map_index, try_number) \
        if task_id and isinstance(run_id, int) and isinstance(try_number, int) else None
    return CallbackTaskInstance(
        dag_id=context.get("dag_id"), task_id=task_id, run_id=run_id, try_number=try_number,
        state=context.get("state"), map_index=map_index, task=task, log_path=context.get("log_path"),
        operator=type(task).__name__ if task is not None else None, execution_date=at, start_date=started,
        end_date=ended, duration=(ended - started).total_seconds() if started and ended else None,
        hostname=facts.get("hostname"), max_tries=allowed - 1 if isinstance(allowed, int) else None, log_url=url)


def with_airflow_context(fn: Callable[..., Any], owner: Any) -> Callable[..., Any]:
    """`fn` called with Airflow's context (owner: the task or DAG whose callback it is)."""
    @functools.wraps(fn)
    def call(context: dict[str, Any]) -> Any:
        dag = owner if hasattr(owner, "tasks") else getattr(owner, "dag", None)
        return fn(callback_context(context, dag, None if owner is dag else owner))
    return call


def airflow_callbacks(callbacks: Mapping[str, list[Any]], owner: Any) -> dict[str, list[Any]]:
    """The callbacks of a task or DAG with each plain function of AIRFLOW_KINDS wrapped (notifiers, which take
    ledger's context and describe themselves, are left as they are)."""
    return {kind: [with_airflow_context(fn, owner) if kind in AIRFLOW_KINDS and inspect.isfunction(fn) else fn
                   for fn in fns] for kind, fns in callbacks.items()}
