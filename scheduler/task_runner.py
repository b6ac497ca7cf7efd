"""One try of one task instance, run inside a forked child process, and the watching of that child.

The pieces, in the order they happen:

* `prepare(item)` runs in the long-lived process that is about to fork (a LocalExecutor worker): it
  imports the task's DAG file, cached per file and modification time, so the forked child inherits the
  loaded module and repeated tries of tasks from the same file pay no import.
* `fork_try(item)` forks the child. The child puts itself in its own process group (so a timeout or a
  shutdown can kill the task with everything it started), asks the kernel to SIGKILL it when its parent
  dies, runs `run_try` and exits with a code that says the outcome (`EXIT_SUCCESS`, `EXIT_FAILED`,
  `EXIT_SKIPPED`), after writing its state and reason to a pipe.
* `run_try(item)` sends fd 1 and 2 to the try's log file, finds the task, runs it and returns
  (state, reason).
* `RunningTry.wait()` waits for the child (a pidfd: woken the moment it exits), kills its process group
  when the execution timeout passes, and returns the outcome.

Spark tries (`runs_in_process(plan)`) are the exception: a JVM-backed SparkSession cannot be shared with
forked children, so `run_in_process(item, plan)` runs them in the calling process itself, with the session
that process keeps (scheduler/spark_session.py): fd 0/1/2 go to the try's log for the duration, the task
runs in a thread so that the execution timeout can cancel its Spark jobs, and a try whose task still does
not stop, or whose session's JVM died, says `retire` (a LocalExecutor worker then exits, to be replaced).
A forked child that finds it was given a Spark try hands it back (`RunningTry.handed_over`) unrun.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import inspect
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, Literal, NoReturn

from ledger import dagbag, secrets
from ledger.context import TaskContext
from ledger.dag import BashTask, PythonTask, Task
from ledger.dagbag import FileResult, load_file
from ledger.errors import SkipTask
from ledger.params import resolve as resolve_params
from ledger.spark import SparkTask
from ledger.templates import TemplateError, has_template, render, template_names
from ledger.xcom import RETURN_KEY, MissingValue, XComError
from ledger.xcom import resolve as resolve_xcom
from scheduler.executors.base import WorkItem

State = Literal["success", "failed", "skipped"]

EXIT_SUCCESS = 0
EXIT_FAILED = 1
EXIT_SKIPPED = 99  # also what a BashTask exits with to say "skipped" (the Airflow convention)
BASH_SKIP_EXIT_CODE = 99
EXIT_CODES: dict[State, int] = {"success": EXIT_SUCCESS, "failed": EXIT_FAILED, "skipped": EXIT_SKIPPED}

REASON_LIMIT = 300
DEFAULT_IMPORT_TIMEOUT = 60.0  # seconds a worker gives a DAG file to import before failing the try
PR_SET_PDEATHSIG = 1
CANCEL_GRACE = 5.0  # seconds an in-process try gets to stop after its timeout cancelled its Spark jobs
HANDOVER_REASON = "a Spark try runs in its worker process, not in a forked child"


class _ImportTimeout(BaseException):
    """Raised by SIGALRM in a worker whose DAG file import hangs (BaseException: load_file must not catch it)."""


# -- small helpers ---------------------------------------------------------------------------------

def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    """Collapse whitespace to one line and cut it to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    message = str(exc)
    return one_line(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def describe_status(status: int) -> str:
    """'exit code N' or 'killed by signal SIGNAME' for a waitpid status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"killed by signal {name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _load_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()  # looked up once, before any fork: children only make the call


def set_parent_death_signal(signum: int) -> bool:
    """Ask Linux to send `signum` to this process when the thread that created it dies."""
    return _prctl is not None and _prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# -- DAG files: loaded once per (file, modification) in the process that forks ----------------------

@dataclass
class _Cached:
    key: tuple[int, int, int]
    result: FileResult


_cache: dict[str, _Cached] = {}
_context_wanted: dict[Callable[..., Any], bool] = {}


def _file_key(fileloc: str) -> tuple[int, int, int]:
    st = os.stat(fileloc)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise _ImportTimeout after `seconds` (main thread only; a no-op elsewhere or without a limit)."""
    import threading

    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: FrameType | None) -> None:
        raise _ImportTimeout

    previous = signal.signal(signal.SIGALRM, fire)
    began = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:  # someone else's alarm was pending: put it back, minus the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(0.001, old_delay - (time.monotonic() - began)), old_interval)


def load_dag_file(fileloc: str, *, root: str | None = None, timeout: float | None = None,
                  capture: io.StringIO | None = None) -> FileResult:
    """load_file (with `root` first on sys.path) cached per file, keyed on its mtime, size and inode; a
    version's snapshot never changes, so a worker imports it once. Failures are not cached."""
    try:
        key = _file_key(fileloc)
    except OSError as exc:
        return FileResult(fileloc, error=f"{fileloc}: {exc.strerror or exc}")
    cached = _cache.get(fileloc)
    if cached is not None and cached.key == key:
        return cached.result
    try:
        with _alarm(timeout):
            if capture is None:
                result = load_file(fileloc, root)
            else:
                with contextlib.redirect_stdout(capture), contextlib.redirect_stderr(capture):
                    result = load_file(fileloc, root)
    except _ImportTimeout:
        _cache.pop(fileloc, None)
        sys.modules.pop(dagbag._module_name(fileloc), None)  # the half-imported module
        return FileResult(fileloc, error=f"{fileloc}: import timed out after {float(timeout or 0)} s")
    if result.error is None:
        _cache[fileloc] = _Cached(key, result)
    else:
        _cache.pop(fileloc, None)
    return result


@dataclass
class Plan:
    """Everything a try needs, worked out before the fork when possible (the child then only runs it)."""

    item: WorkItem
    output: str = ""  # what importing the DAG file printed, for the log of the try that caused the import
    error: str | None = None  # the try fails before running: cannot load, no such DAG, no such task
    task: Task | None = None
    context: TaskContext | None = None
    pass_context: bool = False
    loaded: FileResult | None = None  # the imported DAG file: activated in the try's process before it runs

    @property
    def in_process(self) -> bool:
        """Runs in the process that made the plan, not in a forked child (Spark tries)."""
        return isinstance(self.task, SparkTask)


def runs_in_process(plan: Plan) -> bool:
    return plan.in_process


_plans: dict[tuple[int, int], Plan] = {}  # made by prepare() just before a fork, read by the child


def make_plan(item: WorkItem, *, import_timeout: float | None = None, capture: bool = False) -> Plan:
    """Load the DAG file (cached), find the task, build its context."""
    buffer = io.StringIO() if capture else None
    result = load_dag_file(item.fileloc, root=item.code_root, timeout=import_timeout, capture=buffer)
    plan = Plan(item, output=buffer.getvalue() if buffer is not None else "", loaded=result)
    where = f"version {item.dag_version[:12]} ({item.fileloc})"
    if result.error:
        plan.error = one_line(f"cannot load DAG file of {where}: {result.error}")
        return plan
    dag = next((d for d in result.dags if d.dag_id == item.dag_id), None)
    if dag is None:
        plan.error = one_line(f"DAG {item.dag_id} is not defined by the code of {where}")
        return plan
    plan.task = dag.tasks.get(item.task_id)
    if plan.task is None:
        plan.error = one_line(f"task {item.task_id} is not in the code of {where}")
        return plan
    plan.context = make_context(item, resolve_params(dag.params, item.conf))
    if isinstance(plan.task, PythonTask) and "context" not in plan.task.op_kwargs:
        fn = plan.task.python_callable
        try:
            wanted = _context_wanted.get(fn)
            if wanted is None:
                wanted = _context_wanted[fn] = wants_context(fn)
        except TypeError:  # an unhashable callable
            wanted = wants_context(fn)
        plan.pass_context = wanted
    return plan


def prepare(item: WorkItem, *, import_timeout: float | None = DEFAULT_IMPORT_TIMEOUT) -> Plan:
    """In a long-lived worker, just before forking the child for `item`: load its DAG file (cached per
    file and modification time) and plan the try, so that the child inherits all of it."""
    _plans.clear()
    try:
        plan = make_plan(item, import_timeout=import_timeout, capture=True)
    except Exception as exc:  # never let a try take its worker down
        plan = Plan(item, error=one_line(f"cannot prepare the try: {describe_exception(exc)}"))
    _plans[(item.ti_id, item.try_number)] = plan
    return plan


def forget_prepared() -> None:
    _plans.clear()


def clear_cache() -> None:
    _cache.clear()
    _plans.clear()
    _context_wanted.clear()


# -- inside the child ------------------------------------------------------------------------------

def code_line(item: WorkItem) -> str:
    """The log line that says which code a try runs."""
    if item.code_root is None:
        return f"version {item.dag_version}: this version has no stored code; running {item.fileloc}"
    note = "" if item.code_captured else " (registered before helper modules were captured: its DAG file only)"
    return f"version {item.dag_version}: code {item.code_root}{note}"


def _say(text: str) -> None:
    sys.stdout.write(f"[ledger] {text}\n")
    sys.stdout.flush()


_streams: tuple[io.TextIOWrapper, io.TextIOWrapper] | None = None


def _output_streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """Line-buffered text streams on fd 1 and 2 for tries, made once per forking process and never written
    to by it (so they hold nothing when a child inherits them)."""
    global _streams
    if _streams is None:
        _streams = tuple(  # type: ignore[assignment]
            open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
            for fd in (1, 2))
    assert _streams is not None
    return _streams


def _redirect_output(log_path: str) -> None:
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
    sys.stdout, sys.stderr = _output_streams()


def make_context(item: WorkItem, params: dict[str, Any] | None = None) -> TaskContext:
    return TaskContext(
        dag_id=item.dag_id,
        task_id=item.task_id,
        run_id=str(item.run_id),
        logical_date=item.logical_date,
        data_interval_start=item.data_interval_start,
        data_interval_end=item.data_interval_end,
        try_number=item.try_number,
        dag_version=item.dag_version,
        run_type=item.run_type,
        conf=dict(item.conf),
        log_path=item.log_path,
        signal=item.signal,
        code_dir=item.code_root,
        params=dict(params or {}),
        xcom_values={task: dict(values) for task, values in item.xcom.items()},
        prev_interval=item.prev_interval,
        map_index=item.map_index,
    )


def wants_context(fn: Callable[..., Any]) -> bool:
    """True when the callable has a parameter named `context` (passable by keyword) or **kwargs."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            return True
        if param.name == "context" and param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                      inspect.Parameter.KEYWORD_ONLY):
            return True
    return False


def _call(fn: Callable[..., Any], args: Iterable[Any], kwargs: dict[str, Any],
          keep: Callable[[Any], None] | None = None) -> tuple[State, str | None]:
    """Call task code: SkipTask -> skipped, SystemExit(0) -> success, any other exception -> failed. `keep`
    receives a value it returned (and may refuse it with XComError: the try fails)."""
    try:
        value = fn(*args, **kwargs)
    except SkipTask as exc:
        reason = one_line(str(exc)) or None
        _say(f"skipped: {reason}" if reason else "skipped")
        return "skipped", reason
    except SystemExit as exc:
        if exc.code in (None, 0):
            return "success", None
        traceback.print_exc()
        return "failed", one_line(f"SystemExit: {exc.code}")
    except BaseException as exc:
        traceback.print_exc()
        return "failed", describe_exception(exc)
    if value is not None:
        _say(f"returned {one_line(repr(value), 1000)}")
        if keep is not None:
            try:
                keep(value)
            except XComError as exc:
                _say(f"cannot pass the return value on: {exc}")
                return "failed", one_line(f"return value: {exc}")
    return "success", None


def _run_python(task: PythonTask, context: TaskContext, pass_context: bool) -> tuple[State, str | None]:
    try:
        args = resolve_xcom(task.op_args, context.xcom_values)
        op_kwargs = resolve_xcom(task.op_kwargs, context.xcom_values)
    except MissingValue as exc:
        _say(str(exc))
        return "failed", one_line(str(exc))
    kwargs = {**op_kwargs, "context": context} if pass_context else op_kwargs
    kwargs = {**_airflow_kwargs(task, context, kwargs), **kwargs}
    return _call(task.python_callable, args, kwargs, keep=lambda value: context.xcom_push(RETURN_KEY, value))


def _airflow_kwargs(task: PythonTask, context: TaskContext, given: dict[str, Any]) -> dict[str, Any]:
    """Airflow's context for a callable that asks for it: every name when it takes **kwargs, else the names it
    has parameters for (`ti`, `ds`, `params`, `templates_dict`, ...), as Airflow's PythonOperator does."""
    try:
        params = inspect.signature(task.python_callable).parameters
    except (TypeError, ValueError):
        return {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    wanted = [n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                          inspect.Parameter.KEYWORD_ONLY) and n not in given]
    if not takes_all and not any(n in AIRFLOW_NAMES for n in wanted):
        return {}
    names = {**_template_names(task, context), "templates_dict": context.templates_dict or None}
    if takes_all:
        return {k: v for k, v in names.items() if k not in given and k != "context"}
    return {n: names[n] for n in wanted if n in AIRFLOW_NAMES}


AIRFLOW_NAMES = ("ds", "ds_nodash", "ts", "ts_nodash", "logical_date", "data_interval_start", "data_interval_end",
                 "prev_data_interval_start", "prev_data_interval_end", "run_id", "dag", "task", "ti",
                 "task_instance", "params", "conf", "dag_run", "templates_dict", "var", "conn", "macros")


def _template_names(task: Task, context: TaskContext) -> dict[str, Any]:
    return template_names(
        logical_date=context.logical_date, data_interval_start=context.data_interval_start,
        data_interval_end=context.data_interval_end, prev_interval=context.prev_interval, run_id=context.run_id,
        run_type=context.run_type, try_number=context.try_number, dag_version=context.dag_version, dag=task.dag,
        task=task, params=context.params, conf=context.conf, ti=context)


def _render(plan: Plan, task: Task) -> Task:
    """The task with its template fields rendered (a copy: the planned task is shared by tries); what was
    rendered is written beside the log for the scheduler to store with the try. TemplateError when a
    template fails."""
    context, item = plan.context, plan.item
    assert context is not None
    if not any(has_template(getattr(task, name, None)) for name in task.template_fields):
        return task  # nothing to render: the version's definition is what ran (no file, no cost)
    names = _template_names(task, context)
    rendered = copy.copy(task)
    shown: dict[str, Any] = {}
    for name in task.template_fields:
        value = render(getattr(task, name, None), names, field=name)
        setattr(rendered, name, value)
        shown[name] = value
    if isinstance(rendered, PythonTask) and rendered.templates_dict:
        object.__setattr__(context, "templates_dict", dict(rendered.templates_dict))
    if item.log_path:
        with contextlib.suppress(OSError), open(item.log_path + ".rendered.json", "w", encoding="utf-8") as f:
            json.dump(shown, f, default=repr)
    return rendered


def _mapped_values(task: Task) -> str:
    """The values a mapped instance got, for its log."""
    if isinstance(task, PythonTask) and task.expand_kind == "call":
        got = {arg: task.op_kwargs.get(arg) for arg, _src in task.expand_args}
    else:
        got = {arg: getattr(task, arg, None) for arg, _src in task.expand_args}
    return ", ".join(f"{arg}={one_line(repr(value), 200)}" for arg, value in got.items())


def _run_bash(task: BashTask, context: TaskContext) -> tuple[State, str | None]:
    env = {**os.environ, **context.env(), **task.env}
    _say(f"running: bash -c {task.bash_command!r}" + (f" in {task.cwd}" if task.cwd else ""))
    try:
        code = subprocess.call(["bash", "-c", task.bash_command], env=env, cwd=task.cwd,
                               stdin=subprocess.DEVNULL)
    except OSError as exc:
        traceback.print_exc()
        return "failed", describe_exception(exc)
    if code == 0:
        return "success", None
    if code == BASH_SKIP_EXIT_CODE:
        return "skipped", f"exit code {BASH_SKIP_EXIT_CODE}"
    if code < 0:
        try:
            return "failed", f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return "failed", f"killed by signal {-code}"
    return "failed", f"exit code {code}"


def _execute(plan: Plan) -> tuple[State, str | None]:
    if plan.output:
        _say(f"output while importing {plan.item.fileloc}:")
        sys.stdout.write(plan.output if plan.output.endswith("\n") else plan.output + "\n")
    if plan.error is not None or plan.task is None or plan.context is None:
        reason = plan.error or "nothing to run"
        _say(reason)
        return "failed", reason
    context = plan.context
    try:
        instance = plan.task.for_instance(plan.item.map_index, context.xcom_values)
    except (MissingValue, ValueError, IndexError) as exc:
        reason = one_line(f"cannot make mapped instance {plan.item.map_index}: {exc}")
        _say(reason)
        return "failed", reason
    if plan.item.map_index >= 0:
        _say(f"mapped instance {plan.item.map_index}: {_mapped_values(instance)}")
    try:
        task = _render(plan, instance)
    except TemplateError as exc:
        _say(str(exc))
        return "failed", one_line(str(exc))
    if isinstance(task, PythonTask):
        return _run_python(task, context, plan.pass_context)
    if isinstance(task, BashTask):
        return _run_bash(task, context)
    if isinstance(task, SparkTask):  # never in a forked child: see run_in_process
        _say(HANDOVER_REASON)
        return "failed", HANDOVER_REASON
    execute = getattr(task, "execute", None)
    if callable(execute):  # other task kinds run through execute(context)
        return _call(execute, (), {"context": context})
    return "failed", one_line(f"task {task.task_id} is of kind {task.kind!r}, which has no way to run")


def run_try(item: WorkItem) -> tuple[State, str | None]:
    """Run one try; meant for a forked child (it takes over fd 0, 1 and 2). Returns (state, reason).

    Uses the plan prepare() made before the fork when there is one; else loads the DAG file itself."""
    _redirect_output(item.log_path)
    secrets.seen_settings()
    began = time.monotonic()
    _say(f"{_now_iso()} try {item.try_number} of dag={item.dag_id} run={item.run_id} task={item.task_id}"
         + (f" map_index={item.map_index} " if item.map_index >= 0 else " ") +
         f"(logical date {item.logical_date.isoformat()}, pid {os.getpid()})")
    _say(code_line(item))
    try:
        plan = _plans.get((item.ti_id, item.try_number)) or make_plan(item)
        if plan.loaded is not None and plan.error is None:
            dagbag.activate(plan.loaded)
        state, reason = _execute(plan)
    except BaseException as exc:  # a bug of ours must still end as a clean failed try
        traceback.print_exc()
        state, reason = "failed", describe_exception(exc)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    took = time.monotonic() - began
    _say(f"{_now_iso()} outcome: {state}" + (f" ({reason})" if reason else "") + f" after {took:.3f} s")
    _mask_secrets(item)
    return state, _masked(reason)


def _masked(reason: str | None) -> str | None:
    """A try's reason leaves its process (the try's row, its event, the callback context, the scheduler's
    log): secrets it read are *** there too, as in its log."""
    return secrets.mask(reason) if reason and secrets.secrets_seen() else reason


def _mask_secrets(item: WorkItem) -> None:
    """Secrets the try read (variables, connection passwords: ledger/secrets.py) become *** in its log and its
    rendered templates, once it has ended (its subprocesses wrote to the same file)."""
    if not secrets.secrets_seen():
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    for path in (item.log_path, item.log_path + ".rendered.json"):
        secrets.mask_file(path)


# -- in the calling process: Spark tries ---------------------------------------------------------------

@dataclass
class InProcessResult:
    outcome: Outcome
    # This process should run no more Spark tries (a LocalExecutor worker exits to be replaced): the task's
    # thread was still running CANCEL_GRACE s after its timeout, or the session's JVM died.
    retire: bool = False


def _save_output() -> tuple[list[int], Any, Any]:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return [os.dup(fd) for fd in (0, 1, 2)], sys.stdout, sys.stderr


def _restore_output(saved: tuple[list[int], Any, Any]) -> None:
    fds, stdout, stderr = saved
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for target, fd in enumerate(fds):
        with contextlib.suppress(OSError):
            os.dup2(fd, target)
        with contextlib.suppress(OSError):
            os.close(fd)
    sys.stdout, sys.stderr = stdout, stderr


def _run_spark(task: SparkTask, context: TaskContext) -> tuple[State, str | None, bool]:
    """(state, reason, retire) of a Spark try, run in this thread with this process's session."""
    from scheduler import spark_session

    try:
        with spark_session.session(task.spark_conf, say=_say) as spark:
            state, reason = _call(task.run, (spark, context), {})
        if state == "failed" and spark_session.driver_lost():
            _say("the worker's Spark driver (JVM) is gone: this worker will be replaced")
            return state, reason, True
        return state, reason, False
    except spark_session.SparkUnavailable as exc:
        reason = one_line(str(exc))
        _say(reason)
        return "failed", reason, isinstance(exc, spark_session.DriverLost)


def _execute_in_process(plan: Plan, began: float) -> tuple[State, str | None, bool]:
    """Run a planned try in this process: the task in a thread, cancelled at its execution timeout.
    Returns (state, reason, retire)."""
    if plan.error is not None or not isinstance(plan.task, SparkTask) or plan.context is None:
        state, reason = _execute(plan)
        return state, reason, False
    if plan.output:
        _say(f"output while importing {plan.item.fileloc}:")
        sys.stdout.write(plan.output if plan.output.endswith("\n") else plan.output + "\n")
    task, context = plan.task, plan.context
    result: list[tuple[State, str | None, bool]] = []

    def body() -> None:
        try:
            result.append(_run_spark(task, context))
        except BaseException as exc:  # a bug of ours: still a clean failed try
            traceback.print_exc()
            result.append(("failed", describe_exception(exc), False))

    thread = threading.Thread(target=body, name=f"ledger-try-{plan.item.task_id}", daemon=True)
    thread.start()
    timeout = plan.item.execution_timeout
    try:
        thread.join(None if timeout is None else max(0.0, began + timeout - time.monotonic()))
    except BaseException:  # e.g. Ctrl-C in a sequential executor: stop the Spark work, then go
        from scheduler import spark_session

        spark_session.cancel_all()
        raise
    if not thread.is_alive():
        return result[0] if result else ("failed", "the try ended without an outcome", False)
    from scheduler import spark_session

    reason = f"timed out after {float(timeout or 0)} s"
    _say(f"{reason}: cancelling its Spark jobs")
    spark_session.cancel_all()
    thread.join(CANCEL_GRACE)
    if thread.is_alive():
        _say(f"the task did not stop within {CANCEL_GRACE:.0f} s of the cancel")
        return "failed", reason, True
    return "failed", reason, False


def run_in_process(item: WorkItem, plan: Plan | None = None) -> InProcessResult:
    """Run one try in this process (Spark tries: the process keeps their SparkSession), with the same log,
    header, footer and outcomes as a forked try. fd 0, 1 and 2 go to the try's log while it runs.

    When the task does not stop after its timeout (its thread is still running) or the session's JVM died,
    the result says `retire`: the caller should end this process (a LocalExecutor worker does) or give up
    the session."""
    saved = _save_output()
    began = time.monotonic()
    retire = False
    state: State
    reason: str | None
    try:
        _redirect_output(item.log_path)
        secrets.seen_settings()
        _say(f"{_now_iso()} try {item.try_number} of dag={item.dag_id} run={item.run_id} task={item.task_id}"
         + (f" map_index={item.map_index} " if item.map_index >= 0 else " ") +
             f"(logical date {item.logical_date.isoformat()}, pid {os.getpid()}, in process)")
        _say(code_line(item))
        try:
            plan = plan or _plans.get((item.ti_id, item.try_number)) or make_plan(item, capture=True)
            if plan.loaded is not None and plan.error is None:
                dagbag.activate(plan.loaded)
            state, reason, retire = _execute_in_process(plan, began)
        except Exception as exc:  # a bug of ours must still end as a clean failed try
            traceback.print_exc()
            state, reason = "failed", describe_exception(exc)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        took = time.monotonic() - began
        _say(f"{_now_iso()} outcome: {state}" + (f" ({reason})" if reason else "") + f" after {took:.3f} s")
        _mask_secrets(item)
    finally:
        _restore_output(saved)
    return InProcessResult(Outcome(state, _masked(reason), time.time()), retire)


def end_in_process() -> None:
    """Stop what in-process tries left in this process (its SparkSession), if anything."""
    module = sys.modules.get("scheduler.spark_session")
    if module is not None:
        module.stop_session()


def give_up_in_process() -> None:
    """After a try that says `retire`, in a process that goes on (a sequential executor): drop the session
    it holds."""
    module = sys.modules.get("scheduler.spark_session")
    if module is not None:
        module.discard_session()


_CHILD_SIGNALS: tuple[tuple[signal.Signals, Any], ...] = (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGTERM, signal.SIG_DFL),
    (signal.SIGHUP, signal.SIG_DFL),
    (signal.SIGALRM, signal.SIG_DFL),
    (signal.SIGUSR1, signal.SIG_DFL),
    (signal.SIGUSR2, signal.SIG_DFL),
)


def _signals_to_reset() -> list[tuple[int, Any]]:
    """Worked out in the forking process: the handlers its child must put back to Python's defaults."""
    return [(signum, handler) for signum, handler in _CHILD_SIGNALS if signal.getsignal(signum) is not handler]


def _reset_signals(signals: Iterable[tuple[int, Any]]) -> None:
    """Task code starts with Python's default signal handling, whatever the forking process installed."""
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)  # e.g. set by an asyncio loop in the forking process
    for signum, handler in signals:
        signal.signal(signum, handler)


def _child_main(item: WorkItem, result_fd: int, parent_pid: int, close_fds: Iterable[int],
                signals: Iterable[tuple[int, Any]]) -> NoReturn:
    code = EXIT_FAILED
    me = os.getpid()
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(EXIT_FAILED)
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        _reset_signals(signals)
        plan = _plans.get((item.ti_id, item.try_number))
        if plan is None:  # plan here, before the log is opened: a Spark try goes back to the parent
            try:
                plan = make_plan(item, capture=True)
            except Exception as exc:
                plan = Plan(item, error=one_line(f"cannot prepare the try: {describe_exception(exc)}"))
            _plans[(item.ti_id, item.try_number)] = plan
        if plan.in_process:
            os.write(result_fd, json.dumps({"state": "failed", "reason": HANDOVER_REASON,
                                            "handover": True}).encode())
            os._exit(EXIT_FAILED)
        state, reason = run_try(item)
        code = EXIT_CODES[state]
        if os.getpid() == me:  # not a process the task forked that came back through here
            os.write(result_fd, json.dumps({"state": state, "reason": reason}).encode()[:4000])
    except BaseException as exc:
        code = EXIT_FAILED
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            if os.getpid() == me:
                os.write(result_fd, json.dumps({"state": "failed", "reason": describe_exception(exc)}).encode())
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# -- in the parent of the child --------------------------------------------------------------------

@dataclass
class Outcome:
    state: State
    reason: str | None
    at: float  # time.time() when the end was seen


class RunningTry:
    """A forked child running one try: wait for it (with the execution timeout) or kill it."""

    def __init__(self, item: WorkItem, pid: int, result_fd: int, started_at: float) -> None:
        self.item = item
        self.pid = pid
        self.started_at = started_at  # time.time()
        self._result_fd = result_fd
        self._begun = time.monotonic()
        self.deadline = (self._begun + item.execution_timeout) if item.execution_timeout else None
        self._pidfd: int | None
        try:
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._buffer = b""
        self._eof = False
        self._status: int | None = None
        self.outcome: Outcome | None = None
        self.handed_over = False  # the child found a Spark try: run it with run_in_process() instead

    def fileno(self) -> int:
        """Readable when the child has exited (a pidfd; the result pipe where pidfds are missing)."""
        return self._pidfd if self._pidfd is not None else self._result_fd

    def _exited(self) -> bool:
        """Has the child exited? Leaves it a zombie, so its pid and process group id cannot be reused yet."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _read_result(self) -> None:
        """Read what the child wrote so far (the pipe is non-blocking: a process the task left behind may
        still hold its write end)."""
        while not self._eof:
            try:
                chunk = os.read(self._result_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk

    def kill(self) -> None:
        """SIGKILL the try's whole process group (the child and whatever it started)."""
        kill_group(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        """Wait up to `timeout` seconds (None: until it ends) for the try to end; kill it at its deadline.
        Returns the outcome once the try has ended, else None."""
        if self.outcome is not None:
            return self.outcome
        until = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        while not self._exited():
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                timed_out = True
                self.kill()
                break
            if until is not None and now >= until:
                return None
            limits = [t - now for t in (until, self.deadline) if t is not None]
            if self._pidfd is not None:  # readable the moment the child exits
                select.select([self._pidfd], [], [], max(0.0, min(limits)) if limits else None)
            elif not self._eof:  # no pidfd: the result pipe speaks (or closes) as the child ends; poll as well
                select.select([self._result_fd], [], [], max(0.0, min([*limits, 0.05])))
                self._read_result()
            else:  # the pipe has closed: the child is exiting
                time.sleep(max(0.0, min([*limits, 0.001])))
        return self._finish(timed_out)

    def _finish(self, timed_out: bool) -> Outcome:
        # Still a zombie here: kill what the try left behind in its group, then reap it.
        kill_group(self.pid)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = None
        at = time.time()
        self._read_result()
        self.close()
        state: State
        reason: str | None
        if timed_out:
            state, reason = "failed", f"timed out after {float(self.item.execution_timeout or 0)} s"
            self._log_line(f"{_now_iso()} outcome: failed ({reason}: execution_timeout; its processes were "
                           f"killed) after {time.monotonic() - self._begun:.3f} s")
        else:
            message = self._decode()
            if message is not None:
                state, reason = message
            elif status is None:
                state, reason = "failed", "the try's process vanished"
            elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_SUCCESS:
                state, reason = "success", None
            elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_SKIPPED:
                state, reason = "skipped", f"exit code {EXIT_SKIPPED}"
            else:
                state, reason = "failed", describe_status(status)
        self._status = status
        self.outcome = Outcome(state, reason, at)
        return self.outcome

    def _log_line(self, text: str) -> None:
        """A line the try could not write itself (it was killed), appended to its log."""
        with contextlib.suppress(OSError), open(self.item.log_path, "a", encoding="utf-8") as log:
            log.write(f"[ledger] {text}\n")

    def _decode(self) -> tuple[State, str | None] | None:
        if not self._buffer:
            return None
        try:
            data = json.loads(self._buffer.decode("utf-8", "replace"))
            state = data["state"]
            self.handed_over = data.get("handover") is True
            if state not in EXIT_CODES:
                return None
            reason = data.get("reason")
            return state, (one_line(str(reason)) if reason else None)
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def status(self) -> int | None:
        """The raw waitpid status once the try has ended."""
        return self._status

    def close(self) -> None:
        for fd in (self._pidfd, self._result_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._pidfd = None
        self._result_fd = -1
        self._eof = True


def fork_try(item: WorkItem, *, close_fds: Iterable[int] = ()) -> RunningTry:
    """Fork a child that runs `run_try(item)` in its own process group; `close_fds` are closed in it."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    parent_pid = os.getpid()
    fds = list(close_fds)
    signals = _signals_to_reset()
    _output_streams()  # made once, before forking, so children only install them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        _child_main(item, write_fd, parent_pid, fds, signals)
    started = time.time()
    os.close(write_fd)
    with contextlib.suppress(OSError):  # also here, so killpg works even before the child ran setpgid
        os.setpgid(pid, pid)
    return RunningTry(item, pid, read_fd, started)
