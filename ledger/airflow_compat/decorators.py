"""Airflow's decorators: `@task` (with `multiple_outputs`, `.override()`, `.partial()/.expand()`, Airflow's
operator arguments, and automatic task-id suffixes: calling `f` a second time in a DAG makes `f__1`),
`@task.python`, `@task.bash`, `@task.virtualenv`, `@task.external_python`, `@task.branch`, `@task.short_circuit`,
`@task.sensor`, `@setup`, `@teardown` and `@task_group` (mapped with `.expand()` / `.expand_kwargs()`)."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ledger.airflow_compat.bash import AIRFLOW_SKIP_EXIT_CODE, inherits_environment, skip_exit_codes
from ledger.airflow_compat.flow import BranchPythonOperator, PythonSensor, ShortCircuitOperator
from ledger.airflow_compat.operators import PythonOperator, TaskGroup, get_current_context
from ledger.airflow_compat.virtualenv import (
    BranchExternalPythonOperator,
    BranchPythonVirtualenvOperator,
    ExternalPythonOperator,
    PythonVirtualenvOperator,
)
from ledger.core.errors import DagDefinitionError, SkipTask
from ledger.sdk import dag as ledger_dag
from ledger.sdk.context import current
from ledger.sdk.mapped_groups import expand_group
from ledger.sdk.templates import render
from ledger.sdk.xcom import refs_in


def _free_task_id(task_id: str, dag_kwarg: Any = None) -> str:
    """`task_id`, or `task_id__N` with the first N not taken in the DAG (inside the current group), as Airflow
    names a @task function called more than once."""
    dag = dag_kwarg or (ledger_dag._context_stack[-1] if ledger_dag._context_stack else None)
    if dag is None:
        return task_id
    stack = ledger_dag._group_stack
    prefix = stack[-1].prefix if stack and stack[-1].dag is dag else ""
    if prefix + task_id not in dag.tasks:
        return task_id
    base = task_id.rsplit("__", 1)[0] if "__" in task_id and task_id.rsplit("__", 1)[1].isdigit() else task_id
    n = 1
    while f"{prefix}{base}__{n}" in dag.tasks:
        n += 1
    return f"{base}__{n}"


def _infers_multiple_outputs(func: Callable[..., Any]) -> bool:
    """Airflow's rule: a function annotated to return a dict (or a TypedDict) has multiple outputs."""
    try:
        returns = typing.get_type_hints(func).get("return")
    except Exception:
        return False
    origin = typing.get_origin(returns) or returns
    return origin in (dict, Mapping) or typing.is_typeddict(returns)


class TaskFunction(ledger_dag.TaskFunction):
    """A `@task` function of Airflow's kind (see the module docstring)."""

    operator: Callable[..., Any] = PythonOperator

    def _make(self, **args: Any) -> Any:
        kwargs = dict(self.task_kwargs)
        kwargs.setdefault("multiple_outputs", _infers_multiple_outputs(self.func))
        task_id = _free_task_id(self.task_id, kwargs.get("dag"))
        return self.operator(task_id=task_id, python_callable=self.callable(), **args, **kwargs)

    def callable(self) -> Callable[..., Any]:
        return self.func


class VirtualenvTaskFunction(TaskFunction):
    """`@task.virtualenv`: the function runs in a virtualenv built for its requirements (ledger/sdk/python_envs.py)."""

    operator = PythonVirtualenvOperator


class ExternalPythonTaskFunction(TaskFunction):
    """`@task.external_python`: the function runs in the interpreter at `python`."""

    operator = ExternalPythonOperator


class BranchVirtualenvTaskFunction(TaskFunction):
    """`@task.branch_virtualenv`: a branch whose function runs in a virtualenv."""

    operator = BranchPythonVirtualenvOperator


class BranchExternalPythonTaskFunction(TaskFunction):
    """`@task.branch_external_python`: a branch whose function runs in the interpreter at `python`."""

    operator = BranchExternalPythonOperator


BASH_ENV = "__ledger_bash_env__"  # the op_kwargs key of a @task.bash's env that holds other tasks' values


def _run_bash_command(command: str, cwd: str | None, env: Mapping[str, str] | None, *,
                      skip_codes: tuple[int, ...] = (AIRFLOW_SKIP_EXIT_CODE,), inherit: bool = True) -> str | None:
    """Run a @task.bash function's command as Airflow runs a BashOperator's (ledger/airflow_compat/bash.py): an
    exit code among `skip_codes` skips, another non-zero fails; in the try's environment with `env` over it, or
    (`inherit` False) in `env` and the try's LEDGER_* variables alone. The last line of its output is the value
    passed on."""
    print(f"[ledger] running: bash -c {command!r}", flush=True)
    context = current()
    base = os.environ if inherit else context[0].env() if context is not None else {}
    argv = ["bash" if inherit else shutil.which("bash") or "bash", "-c", command]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               cwd=cwd, env={**base, **(env or {})}, text=True, errors="backslashreplace")
    last = None
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        last = line.rstrip("\n")
    code = process.wait()
    if code in skip_codes:
        raise SkipTask(f"Bash command returned exit code {code}")
    if code != 0:
        raise RuntimeError(f"Bash command failed. The command returned a non-zero exit code {code}.")
    return last


class BashTaskFunction(TaskFunction):
    """`@task.bash`: the function returns the command (a Jinja template, rendered with the try's context)."""

    def callable(self) -> Callable[..., Any]:
        func = self.func
        cwd, env = self.task_kwargs.get("cwd"), self.task_kwargs.get("env")
        processor = self.task_kwargs.get("output_processor")
        skip_codes = skip_exit_codes(self.task_id, self.task_kwargs.get("skip_on_exit_code", AIRFLOW_SKIP_EXIT_CODE))
        inherit = inherits_environment(env, bool(self.task_kwargs.get("append_env", False)))

        @functools.wraps(func)
        def run_bash(*args: Any, **kwargs: Any) -> Any:
            given = kwargs.pop(BASH_ENV, env)  # (other tasks' values in it resolved, as the function's arguments)
            command = func(*args, **kwargs)
            if not isinstance(command, str) or not command.strip():
                raise TypeError(f"a @task.bash function must return a non-empty command, not {command!r}")
            context = get_current_context()
            command = render(command, context, field="bash_command")
            last = _run_bash_command(command, cwd, render(given, context, field="env") if given else None,
                                     skip_codes=skip_codes, inherit=inherit)
            return processor(last) if processor is not None else last  # Airflow's output_processor

        return run_bash

    def _make(self, **args: Any) -> Any:
        kwargs = {k: v for k, v in self.task_kwargs.items()
                  if k not in ("cwd", "env", "append_env", "output_processor", "skip_on_exit_code")}
        task_id = _free_task_id(self.task_id, kwargs.get("dag"))
        env = self.task_kwargs.get("env")
        if env and refs_in(env):  # `env={"N": other["count"]}`: runs after `other`, and gets its value
            args = {**args, "op_kwargs": {**(args.get("op_kwargs") or {}), BASH_ENV: env}}
        return self.operator(task_id=task_id, python_callable=self.callable(), **args, **kwargs)


class PySparkTaskFunction(TaskFunction):
    """`@task.pyspark`: the function runs in the worker's SparkSession (ledger/airflow_compat/spark.py)."""

    def _make(self, **args: Any) -> Any:
        from ledger.airflow_compat.spark import PySparkTask

        kwargs = dict(self.task_kwargs)
        kwargs.setdefault("multiple_outputs", _infers_multiple_outputs(self.func))
        return PySparkTask(_free_task_id(self.task_id, kwargs.get("dag")), self.func, **args, **kwargs)


class BranchTaskFunction(TaskFunction):
    """`@task.branch`: the function returns the task id(s) to follow."""

    operator = BranchPythonOperator


class ShortCircuitTaskFunction(TaskFunction):
    """`@task.short_circuit`: a falsy return value skips the tasks downstream."""

    operator = ShortCircuitOperator


class SensorTaskFunction(TaskFunction):
    """`@task.sensor`: the function is the sensor's check (True or a PokeReturnValue once the condition holds)."""

    operator = PythonSensor


class SetupTaskFunction(TaskFunction):
    """`@setup`: the task made is a setup task."""

    def _make(self, **args: Any) -> Any:
        return super()._make(**args).as_setup()


class TeardownTaskFunction(TaskFunction):
    """`@teardown` (with `on_failure_fail_dagrun`): the task made is a teardown task."""

    def _make(self, **args: Any) -> Any:
        kwargs = dict(self.task_kwargs)
        fail = kwargs.pop("on_failure_fail_dagrun", None)
        made = TaskFunction(self.func, self.task_id, kwargs, self.partial_kwargs)._make(**args)
        return made.as_teardown(on_failure_fail_dagrun=fail)


def _role(kind: type[TaskFunction]) -> Callable[..., Any]:
    """Airflow's `@setup` / `@teardown`, over a function or a `@task` function."""
    def decorate(fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        def wrap(func: Callable[..., Any]) -> TaskFunction:
            if isinstance(func, TaskFunction):
                return kind(func.func, task_id or func.task_id, {**func.task_kwargs, **kwargs}, func.partial_kwargs)
            return kind(func, task_id, kwargs)
        return wrap(fn) if fn is not None else wrap
    return decorate


setup = _role(SetupTaskFunction)
teardown = _role(TeardownTaskFunction)


class TaskDecorator:
    """`task`: `@task`, `@task(...)`, `@task.python`, `@task.bash`, `@task.virtualenv`, `@task.external_python`,
    `@task.branch`, `@task.short_circuit`, `@task.sensor`."""

    def __call__(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                 **kwargs: Any) -> Any:
        return self._decorate(TaskFunction, fn, task_id, kwargs)

    def python(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        return self._decorate(TaskFunction, fn, task_id, kwargs)

    def bash(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        return self._decorate(BashTaskFunction, fn, task_id, kwargs)

    def virtualenv(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                   **kwargs: Any) -> Any:
        return self._decorate(VirtualenvTaskFunction, fn, task_id, kwargs)

    def external_python(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                        **kwargs: Any) -> Any:
        return self._decorate(ExternalPythonTaskFunction, fn, task_id, kwargs)

    def branch(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        return self._decorate(BranchTaskFunction, fn, task_id, kwargs)

    def short_circuit(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                      **kwargs: Any) -> Any:
        return self._decorate(ShortCircuitTaskFunction, fn, task_id, kwargs)

    def branch_virtualenv(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                          **kwargs: Any) -> Any:
        return self._decorate(BranchVirtualenvTaskFunction, fn, task_id, kwargs)

    def branch_external_python(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None,
                               **kwargs: Any) -> Any:
        return self._decorate(BranchExternalPythonTaskFunction, fn, task_id, kwargs)

    def pyspark(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        return self._decorate(PySparkTaskFunction, fn, task_id, kwargs)

    def sensor(self, fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        return self._decorate(SensorTaskFunction, fn, task_id, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise DagDefinitionError(f"@task.{name} is not provided by ledger; use @task (or @task.bash) and run the "
                                 "tool from the task's code")

    @staticmethod
    def _decorate(kind: type[TaskFunction], fn: Callable[..., Any] | None, task_id: str | None,
                  kwargs: dict[str, Any]) -> Any:
        def wrap(func: Callable[..., Any]) -> TaskFunction:
            return kind(func, task_id, kwargs)
        return wrap(fn) if fn is not None else wrap


task = TaskDecorator()


class TaskGroupFunction:
    """A `@task_group` function: calling it inside a DAG makes a task group (named after the function, with a
    suffix when called again) and runs the function inside it; it returns what the function returns, or the
    group."""

    def __init__(self, func: Callable[..., Any], group_kwargs: dict[str, Any]) -> None:
        self.func = func
        self.group_kwargs = group_kwargs
        functools.update_wrapper(self, func)

    def override(self, **group_kwargs: Any) -> TaskGroupFunction:
        made = TaskGroupFunction(self.func, {**self.group_kwargs, **group_kwargs})
        made.partial_kwargs = dict(self.partial_kwargs)
        return made

    partial_kwargs: dict[str, Any] = {}

    def partial(self, **kwargs: Any) -> TaskGroupFunction:
        """The arguments every instance of the mapped group shares (then `.expand()` or `.expand_kwargs()`)."""
        made = self.override()
        made.partial_kwargs = {**self.partial_kwargs, **kwargs}
        return made

    def expand(self, **expand: Any) -> Any:
        """A mapped task group: its tasks run once per item (ledger/sdk/mapped_groups.py)."""
        return self._mapped(expand=expand)

    def expand_kwargs(self, kwargs: Any) -> Any:
        return self._mapped(expand_kwargs=kwargs)

    def _mapped(self, **how: Any) -> Any:
        options = dict(self.group_kwargs)
        group_id = options.pop("group_id", None) or self.func.__name__
        tooltip = options.pop("tooltip", None) or inspect.cleandoc(self.func.__doc__ or "")
        return expand_group(self.func, group_id, partial=self.partial_kwargs, dag=options.get("dag"),
                            prefix_group_id=options.get("prefix_group_id", True), tooltip=tooltip, **how)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        options = dict(self.group_kwargs)
        group_id = options.pop("group_id", None) or self.func.__name__
        dag = options.get("dag") or (ledger_dag._context_stack[-1] if ledger_dag._context_stack else None)
        if dag is not None:
            taken = {t.group.group_id for t in dag.tasks.values() if t.group is not None}
            stack = ledger_dag._group_stack
            parent = stack[-1].group_id + "." if stack and stack[-1].dag is dag else ""
            if parent + group_id in taken:
                n = 1
                while f"{parent}{group_id}__{n}" in taken:
                    n += 1
                group_id = f"{group_id}__{n}"
        tooltip = options.pop("tooltip", None) or inspect.cleandoc(self.func.__doc__ or "")
        unknown = sorted(set(options) - {"dag", "prefix_group_id", "default_args", "ui_color", "ui_fgcolor",
                                         "add_suffix_on_collision", "parent_group"})
        if unknown:
            raise DagDefinitionError(f"task group {group_id!r}: unknown argument {unknown[0]!r}")
        with TaskGroup(group_id, tooltip, dag=options.get("dag"), default_args=options.get("default_args"),
                       prefix_group_id=options.get("prefix_group_id", True)) as group:
            result = self.func(*args, **kwargs)
        return result if result is not None else group


def task_group(fn: Callable[..., Any] | None = None, /, **group_kwargs: Any) -> Any:
    """Airflow's `@task_group`."""
    def wrap(func: Callable[..., Any]) -> TaskGroupFunction:
        return TaskGroupFunction(func, group_kwargs)
    return wrap(fn) if fn is not None else wrap
