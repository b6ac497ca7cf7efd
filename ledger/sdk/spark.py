"""SparkTask: a Python callable that receives a SparkSession and its run's context.

    from ledger.sdk.spark import SparkTask, spark_task

    def clean(spark, context, *, table):
        day = context.data_interval_start.date().isoformat()
        ...

    SparkTask("clean", clean, op_kwargs={"table": "events"}, spark_conf={"spark.sql.shuffle.partitions": "8"})

The scheduler's worker runs a Spark try inside its own (long-lived) process, with a SparkSession that it
builds on the first Spark try and reuses for the next ones (see scheduler/runtime/spark_session.py for how the
session is configured). Nothing here imports pyspark: DAG files that use SparkTask parse fast.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

from ledger.core.errors import DagDefinitionError
from ledger.sdk.dag import Task, _callable_definition, _jsonable

if TYPE_CHECKING:
    from ledger.sdk.context import TaskContext


def _conf_value(task_id: str, key: object, value: object) -> tuple[str, str]:
    if not isinstance(key, str) or not key.strip():
        raise DagDefinitionError(f"task {task_id!r}: spark_conf keys must be non-empty strings, not {key!r}")
    if isinstance(value, bool):
        return key, "true" if value else "false"
    if isinstance(value, str | int | float):
        return key, str(value)
    raise DagDefinitionError(f"task {task_id!r}: spark_conf[{key!r}] must be a string (or a number or bool), "
                             f"not {type(value).__name__}")


class SparkTask(Task):
    """Runs `spark_callable(spark, context, **op_kwargs)` with the worker's SparkSession.

    `spark_conf` holds spark.* settings for this task: runtime (SQL) settings are set on the session for
    the try and put back after it; settings that only apply when a session starts (e.g.
    spark.executor.memory) make the worker restart its session when they differ from the running one."""

    kind = "spark"

    def __init__(self, task_id: str, spark_callable: Callable[..., Any], *,
                 op_kwargs: Mapping[str, Any] | None = None, spark_conf: Mapping[str, Any] | None = None,
                 **task_args: Any) -> None:
        if not callable(spark_callable):
            raise DagDefinitionError(f"task {task_id!r}: spark_callable must be callable")
        self.spark_callable = spark_callable
        self.op_kwargs = dict(op_kwargs or {})
        for reserved in ("spark", "context"):
            if reserved in self.op_kwargs:
                raise DagDefinitionError(f"task {task_id!r}: op_kwargs cannot set {reserved!r} "
                                         "(the callable receives it)")
        self.spark_conf: dict[str, str] = dict(
            _conf_value(task_id, key, value) for key, value in dict(spark_conf or {}).items())
        super().__init__(task_id, **task_args)

    def definition(self) -> dict[str, Any]:
        return {**_callable_definition(self.spark_callable), "op_kwargs": _jsonable(self.op_kwargs),
                "spark_conf": dict(sorted(self.spark_conf.items()))}

    def run(self, spark: Any, context: TaskContext) -> Any:
        """Call the task's code (the worker supplies the session and the context)."""
        return self.spark_callable(spark, context, **self.op_kwargs)


@overload
def spark_task(fn: Callable[..., Any], /) -> Callable[..., SparkTask]: ...
@overload
def spark_task(*, task_id: str | None = None, spark_conf: Mapping[str, Any] | None = None,
               **task_args: Any) -> Callable[[Callable[..., Any]], Callable[..., SparkTask]]: ...


def spark_task(fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
               spark_conf: Mapping[str, Any] | None = None, **task_args: Any) -> Any:
    """Decorator form of SparkTask: calling the decorated function inside a DAG adds the task; the
    keyword arguments of that call become its op_kwargs.

        @spark_task(spark_conf={"spark.sql.shuffle.partitions": "8"})
        def aggregate(spark, context, *, source):
            ...

        with DAG(...):
            aggregate(source="/data/clean")
    """

    def wrap(func: Callable[..., Any]) -> Callable[..., SparkTask]:
        @functools.wraps(func)
        def make(**op_kwargs: Any) -> SparkTask:
            return SparkTask(task_id or func.__name__, func, op_kwargs=op_kwargs, spark_conf=spark_conf,
                             **task_args)

        return make

    return wrap(fn) if fn is not None else wrap


__all__ = ["SparkTask", "spark_task"]
