"""Running one try's task code in the current process: its output goes to the try's log, its templates are
rendered, the task runs (Python, Bash or `execute(context)`), and the outcome is (state, reason).

Where that process is: a child forked for the try (scheduler/runtime/try_process.py, the default), or the worker
process itself (scheduler/runtime/in_process.py: Spark tries, and Python tries with LEDGER_REUSE_WORKERS). What the
try needs is planned before either (scheduler/runtime/try_plan.py).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from ledger.core.errors import FailWithoutRetry, RescheduleTask, SkipTask
from ledger.core.mapping import KWARGS
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import dagbag
from ledger.scheduler.runtime.try_logging import capture_logging, output_streams, release_logging
from ledger.scheduler.runtime.try_outcome import (
    BASH_SKIP_EXIT_CODE,
    NO_RETRY_PREFIX,
    State,
    describe_exception,
    one_line,
)
from ledger.scheduler.runtime.try_plan import Plan, code_line, make_plan, parameters, prepared
from ledger.sdk import secrets, try_outputs
from ledger.sdk.branching import record_choice
from ledger.sdk.context import TaskContext, current, push_return, set_current, set_environment
from ledger.sdk.dag import BashTask, PythonTask, Task
from ledger.sdk.params import resolve_refs
from ledger.sdk.sensors import BaseSensor, PokeReturnValue, PythonSensor, check_until_done
from ledger.sdk.spark import SparkTask
from ledger.sdk.templates import CONTEXT_NAMES, TemplateError, has_template, render, template_names
from ledger.sdk.xcom import RETURN_KEY, MissingValue, XComError, refs_in
from ledger.sdk.xcom import resolve as resolve_xcom

HANDOVER_REASON = "a Spark try runs in its worker process, not in a forked child"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def say(text: str) -> None:
    sys.stdout.write(f"[ledger] {text}\n")
    sys.stdout.flush()


def redirect_output(log_path: str) -> None:
    """Send fd 1 and 2 (and sys.stdout/sys.stderr, line-buffered) to the try's log; stdin from /dev/null."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    try:
        fd = os.open(log_path, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        fd = os.open(log_path, flags, 0o644)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)
    sys.stdout, sys.stderr = output_streams()


def call_task(fn: Callable[..., Any], args: Iterable[Any], kwargs: dict[str, Any],
          keep: Callable[[Any], None] | None = None) -> tuple[State, str | None]:
    """Call task code: SkipTask -> skipped, SystemExit(0) -> success, any other exception -> failed. `keep`
    receives a value it returned (and may refuse it with XComError: the try fails)."""
    try:
        value = fn(*args, **kwargs)
    except SkipTask as exc:
        reason = one_line(str(exc)) or None
        say(f"skipped: {reason}" if reason else "skipped")
        return "skipped", reason
    except RescheduleTask as exc:
        return "up_for_reschedule", one_line(str(exc))
    except FailWithoutRetry as exc:
        say(f"failed, without retries: {exc}")
        return "failed", NO_RETRY_PREFIX + describe_exception(exc)
    except SystemExit as exc:
        if exc.code in (None, 0):
            return "success", None
        _print_traceback(exc)
        return "failed", one_line(f"SystemExit: {exc.code}")
    except BaseException as exc:
        _print_traceback(exc)
        return "failed", _failure_reason(exc)
    if value is not None:
        say(f"returned {one_line(repr(value), 1000)}")
        if keep is not None:
            try:
                keep(value)
            except XComError as exc:
                say(f"cannot pass the return value on: {exc}")
                return "failed", one_line(f"return value: {exc}")
    return "success", None


_deferred: list[BaseException] | None = None  # a forked try's tracebacks, printed once its report is left


def _print_traceback(exc: BaseException) -> None:
    """The traceback of what task code raised, in its log: at once; in a forked try's process, after its report has
    been left for its worker (formatting it is the slowest part of a failing try's end, decision 0253)."""
    if _deferred is not None:
        _deferred.append(exc)
    else:
        traceback.print_exception(exc)


def _failure_reason(exc: BaseException) -> str:
    """A failed try's reason; the running task's retry policy (Airflow's `retry_policy=`: the task's
    `retry_decision`) may make it spend no retry, or name its retry's delay."""
    reason = describe_exception(exc)
    found = current()
    decide = getattr(found[1], "retry_decision", None) if found is not None else None
    decided = decide(exc, found[0]) if found is not None and callable(decide) else None
    if decided is None:
        return reason
    action, delay = decided
    if action == "fail":
        say("failed, without retries: the task's retry policy says so")
        return NO_RETRY_PREFIX + reason
    if action == "retry" and delay is not None:
        return f"retry in {delay:g} s: {reason}"
    return reason


def _run_python(task: PythonTask, context: TaskContext, pass_context: bool) -> tuple[State, str | None]:
    try:
        args = resolve_refs(resolve_xcom(task.op_args, context.xcom_values), context.params)
        op_kwargs = resolve_refs(resolve_xcom(task.op_kwargs, context.xcom_values), context.params)
    except MissingValue as exc:
        say(str(exc))
        return "failed", one_line(str(exc))
    kwargs = {**op_kwargs, "context": context} if pass_context else op_kwargs
    kwargs = {**_airflow_kwargs(task, context, kwargs), **kwargs}
    return call_task(task.invoke, args, kwargs, keep=lambda value: push_return(task, context, value))


def _run_branch(task: PythonTask, context: TaskContext, pass_context: bool) -> tuple[State, str | None]:
    """A branch or short-circuit Python task: its return value is its choice, recorded (ledger/sdk/branching.py)."""
    context.xcom_values.get(task.task_id, {}).pop(RETURN_KEY, None)  # (an earlier try's, among the run's values)
    state, reason = _run_python(task, context, pass_context)
    if state != "success":
        return state, reason
    try:
        say(record_choice(task, context, context.xcom_values.get(task.task_id, {}).get(RETURN_KEY)))
    except ValueError as exc:
        say(str(exc))
        return "failed", one_line(str(exc))
    return state, reason


def _run_sensor(task: BaseSensor, context: TaskContext, pass_context: bool) -> tuple[State, str | None]:
    """A sensor's checks (ledger/sdk/sensors.py); a PythonSensor's callable is called as a PythonTask's is."""
    def check(ctx: TaskContext) -> bool | PokeReturnValue:
        if not isinstance(task, PythonSensor):
            poke_airflow = getattr(task, "poke_airflow", None)
            if callable(poke_airflow):  # Airflow's BaseSensorOperator (ledger/airflow_compat): Airflow's context
                found: bool | PokeReturnValue = poke_airflow(ctx, _template_names(task, ctx))
                return found
            return task.poke(ctx)
        args = resolve_refs(resolve_xcom(task.op_args, ctx.xcom_values), ctx.params)
        kwargs = resolve_refs(resolve_xcom(task.op_kwargs, ctx.xcom_values), ctx.params)
        kwargs = {**_airflow_kwargs(task, ctx, kwargs), **kwargs}
        if pass_context:
            kwargs["context"] = ctx
        result = task.python_callable(*args, **kwargs)
        return result if isinstance(result, PokeReturnValue) else bool(result)

    return call_task(check_until_done, (task, context, check), {},
                     keep=lambda value: push_return(task, context, value))


def _airflow_kwargs(task: PythonTask | PythonSensor, context: TaskContext, given: dict[str, Any]) -> dict[str, Any]:
    """Airflow's context for a callable that asks for it: every name when it takes **kwargs, else the names it
    has parameters for (`ti`, `ds`, `params`, `templates_dict`, ...), as Airflow's PythonOperator does."""
    found = parameters(task.python_callable)  # (read by the worker as it planned the try)
    if found is None:
        return {}
    takes_all = found.takes_all
    wanted = [n for n in found.names if n not in given]
    if not takes_all and not any(n in AIRFLOW_NAMES for n in wanted):
        return {}
    names = {**_template_names(task, context), "templates_dict": context.templates_dict or None}
    if takes_all:
        return {k: v for k, v in names.items() if k not in given and k != "context"}
    return {n: names[n] for n in wanted if n in AIRFLOW_NAMES}


AIRFLOW_NAMES = CONTEXT_NAMES


def _template_names(task: Task, context: TaskContext) -> dict[str, Any]:
    return template_names(
        logical_date=context.logical_date, data_interval_start=context.data_interval_start,
        data_interval_end=context.data_interval_end, prev_interval=context.prev_interval, run_id=context.run_id,
        prev_success=context.prev_success, run_type=context.run_type, try_number=context.try_number,
        dag_version=context.dag_version, dag=task.dag, task=task, params=context.params, conf=context.conf, ti=context,
        run_started=context.run_started)


def _render(plan: Plan, task: Task) -> Task:
    """The task with its template fields rendered (a copy: the planned task is shared by tries); what was
    rendered is kept for the try's report. TemplateError when a
    template fails."""
    context = plan.context
    assert context is not None
    # another task's value in a templated field (Airflow's XComArg) is resolved, then not rendered, as Airflow
    # does; a PythonTask resolves its arguments when it calls its callable
    values = not isinstance(task, PythonTask) and any(refs_in(getattr(task, n, None)) for n in task.template_fields)
    if not values and not any(has_template(getattr(task, name, None)) for name in task.template_fields):
        if isinstance(task, PythonTask) and task.templates_dict:  # the callable's templates_dict, as given
            object.__setattr__(context, "templates_dict", dict(task.templates_dict))
        return task  # nothing to render: the version's definition is what ran (no file, no cost)
    names = _template_names(task, context)
    rendered = copy.copy(task)
    shown: dict[str, Any] = {}
    for name in task.template_fields:
        value = render(getattr(task, name, None), names, field=name)
        if values:
            try:
                value = resolve_xcom(value, context.xcom_values)
            except MissingValue as exc:
                raise TemplateError(f"{name}: {exc}") from None
        setattr(rendered, name, value)
        shown[name] = value
    if isinstance(rendered, PythonTask) and rendered.templates_dict:
        object.__setattr__(context, "templates_dict", dict(rendered.templates_dict))
    try_outputs.rendered(shown)  # (for the try's report)
    return rendered


def _mapped_values(task: Task) -> str:
    """The values a mapped instance got, for its log."""
    if task.group_item is not None:  # a task of a mapped task group: the group's arguments
        got = dict(task.group_item)
    elif isinstance(task, PythonTask) and task.expand_kind == "call":
        got = {arg: task.op_kwargs.get(arg) for arg, _src in task.expand_args if arg != KWARGS}
        if any(arg == KWARGS for arg, _src in task.expand_args):  # expand_kwargs(): every argument
            got = dict(task.op_kwargs)
    else:
        got = {arg: getattr(task, arg, None) for arg in task.mappable_fields} if any(
            arg == KWARGS for arg, _src in task.expand_args) else {
            arg: getattr(task, arg, None) for arg, _src in task.expand_args}
    return ", ".join(f"{arg}={one_line(repr(value), 200)}" for arg, value in got.items())


def _run_bash(task: BashTask, context: TaskContext) -> tuple[State, str | None]:
    """Run a BashTask's command: in the try's environment with the LEDGER_* variables and the task's `env` over
    it (an Airflow BashOperator given `env` without `append_env`: the try's environment is left out, as Airflow
    leaves it out: `inherit_env`); an exit code among the task's `skip_exit_codes` (99 unless it says otherwise)
    skips it, another non-zero one fails it. Airflow's BashOperator's rules: ledger/airflow_compat/bash.py."""
    inherit = getattr(task, "inherit_env", True)
    env = {**(os.environ if inherit else {}), **context.env(), **task.env}
    # (without the try's PATH, bash is found where the try's PATH finds it, as Airflow finds it)
    argv = ["bash" if inherit else shutil.which("bash") or "bash", "-c", task.bash_command]
    say(f"running: bash -c {task.bash_command!r}" + (f" in {task.cwd}" if task.cwd else ""))
    last: list[str] = []
    try:
        if getattr(task, "push_last_line", False):  # Airflow's BashOperator: its last output line is passed on
            code = _call_keeping_last_line(argv, task.cwd, env, last)
        else:
            code = subprocess.call(argv, env=env, cwd=task.cwd, stdin=subprocess.DEVNULL)
    except OSError as exc:
        traceback.print_exc()
        return "failed", describe_exception(exc)
    if code in getattr(task, "skip_exit_codes", (BASH_SKIP_EXIT_CODE,)):  # (first: 0 may be one, as in Airflow)
        return "skipped", f"exit code {code}"
    if code == 0:
        if last:
            processor = getattr(task, "output_processor", None)  # Airflow's BashOperator(output_processor=...)
            try:
                push_return(task, context, processor(last[-1]) if processor is not None else last[-1])
            except XComError as exc:
                return "failed", one_line(f"return value: {exc}")
        return "success", None
    if code < 0:
        try:
            return "failed", f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return "failed", f"killed by signal {-code}"
    return "failed", f"exit code {code}"


def _call_keeping_last_line(argv: list[str], cwd: str | None, env: dict[str, str], last: list[str]) -> int:
    """Run the command with its output (stdout and stderr, as they come) copied to the log line by line; the
    last line goes into `last`."""
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    assert process.stdout is not None
    for raw in process.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        last[:] = [raw.decode("utf-8", "backslashreplace").rstrip("\n")]
    return process.wait()


def execute_plan(plan: Plan) -> tuple[State, str | None]:
    if plan.output:
        say(f"output while importing {plan.item.fileloc}:")
        sys.stdout.write(plan.output if plan.output.endswith("\n") else plan.output + "\n")
    if plan.error is not None or plan.task is None or plan.context is None:
        reason = plan.error or "nothing to run"
        say(reason)
        return "failed", reason
    context = plan.context
    object.__setattr__(context, "start_date", datetime.now(UTC))  # (Airflow's ti.start_date: the try begins)
    try:
        instance = plan.task.for_instance(plan.item.map_index, context.xcom_values)
    except (MissingValue, ValueError, IndexError) as exc:
        reason = one_line(f"cannot make mapped instance {plan.item.map_index}: {exc}")
        say(reason)
        return "failed", reason
    secrets.seen_arguments(instance)  # its secret-looking arguments are *** in its log, as rendered too
    if plan.item.map_index >= 0:
        say(f"mapped instance {plan.item.map_index}: {_mapped_values(instance)}")
    try:
        task = _render(plan, instance)
    except TemplateError as exc:
        say(str(exc))
        return "failed", one_line(str(exc))
    if task is not instance:  # rendered: its values are new
        secrets.seen_arguments(task)
    set_current(context, task)  # Airflow's get_current_context() reads it
    hooks = getattr(task, "airflow_hooks", None)  # Airflow's pre_execute= / post_execute= (ledger/airflow_compat)
    if not callable(hooks):
        return _dispatch(plan, task, context)
    ended = call_task(hooks, ("pre", None), {})
    if ended[0] == "success":
        ended = _dispatch(plan, task, context)
    if ended[0] == "success":  # its result: the value it passed on (none: None)
        return call_task(hooks, ("post", context.xcom_values.get(task.task_id, {}).get(RETURN_KEY)), {})
    return ended


def _dispatch(plan: Plan, task: Task, context: TaskContext) -> tuple[State, str | None]:
    """Run the (rendered) task by its kind."""
    if isinstance(task, PythonTask):
        if task.flow is not None:
            return _run_branch(task, context, plan.pass_context)
        return _run_python(task, context, plan.pass_context)
    if isinstance(task, BashTask):
        return _run_bash(task, context)
    if isinstance(task, BaseSensor):
        return _run_sensor(task, context, plan.pass_context)
    if isinstance(task, SparkTask):  # never in a forked child: see run_in_process
        say(HANDOVER_REASON)
        return "failed", HANDOVER_REASON
    run_operator = getattr(task, "run_operator", None)
    if callable(run_operator):  # Airflow's operators (ledger/airflow_compat): execute() with Airflow's context
        return call_task(run_operator, (context, _template_names(task, context)), {},
                         keep=lambda value: push_return(task, context, value))
    execute = getattr(task, "execute", None)
    if callable(execute):  # other task kinds run through execute(context)
        return call_task(execute, (), {"context": context})
    return "failed", one_line(f"task {task.task_id} is of kind {task.kind!r}, which has no way to run")


def run_try(item: WorkItem, on_end: Callable[[State, str | None], None] | None = None) -> tuple[State, str | None]:
    """Run one try in the child fork_try forked (it takes over fd 0, 1 and 2). Returns (state, reason).

    Uses the plan prepare() made before the fork when there is one (and what settle() set up with it); else loads the
    DAG file itself. The settings' secrets are those fork_try worked out just before the fork. `on_end` is
    called with the outcome the moment the task's code has ended, before anything else (the log's outcome line, the
    masking of the log, the process's exit): the try's report is left for its worker there (decision 0253)."""
    global _deferred
    redirect_output(item.log_path)
    began = time.monotonic()
    _deferred = []  # (this process exits after the try)
    try_outputs.begin(item.log_path + try_outputs.OTHERS if item.log_path else None)
    say_started(item, forked=True)
    try:
        plan = prepared(item) or make_plan(item)
        if not plan.settled:  # (else the process that forked this one did it: try_plan.settle)
            if plan.loaded is not None and plan.error is None:
                dagbag.activate(plan.loaded)
            if plan.context is not None:  # for good: this process exits after the try (nothing to put back)
                set_environment(plan.context)
        state, reason = execute_plan(plan)
    except BaseException as exc:  # a bug of ours must still end as a clean failed try
        traceback.print_exc()
        state, reason = "failed", describe_exception(exc)
    if on_end is not None:
        on_end(state, masked(reason))
    say_ended(item, state, reason, began, forked=True)
    return state, masked(reason)


def say_started(item: WorkItem, where: str = "", *, forked: bool = False) -> None:
    """The head of a try's log (once its output goes there): which try, which process, which code. `forked`: in a
    try's process forked by fork_try, which worked out the settings' secrets just before (see run_try)."""
    secrets.seen_settings(as_worked_out=forked)
    capture_logging()
    say(f"{now_iso()} try {item.try_number} of dag={item.dag_id} run={item.run_id} task={item.task_id}"
        + (f" map_index={item.map_index} " if item.map_index >= 0 else " ")
        + f"(logical date {item.logical_date.isoformat()}, pid {os.getpid()}{where})")
    say(code_line(item))


def say_ended(item: WorkItem, state: State | Literal["lost"], reason: str | None, began: float, *,
              forked: bool = False) -> None:
    """The foot of a try's log (after the tracebacks of a forked try's code): its outcome and how long it took; then
    the secrets it read are masked there. `forked`: in a try's own process, which exits next (its logging is not
    put back)."""
    for exc in _deferred or ():
        with contextlib.suppress(Exception):
            traceback.print_exception(exc)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    if not forked:
        release_logging()
    took = time.monotonic() - began
    say(f"{now_iso()} outcome: {state}" + (f" ({reason})" if reason else "") + f" after {took:.3f} s")
    mask_secrets(item)


def masked(reason: str | None) -> str | None:
    """A try's reason leaves its process (the try's row, its event, the callback context, the scheduler's
    log): secrets it read are *** there too, as in its log."""
    return secrets.mask(reason) if reason and secrets.secrets_seen() else reason


def mask_secrets(item: WorkItem) -> None:
    """Secrets the try read (variables, connection passwords: ledger/sdk/secrets.py) become *** in its log, once it
    has ended (its subprocesses wrote to the same file); its report masks its rendered templates itself."""
    if not secrets.secrets_seen():
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    secrets.mask_file(item.log_path)
