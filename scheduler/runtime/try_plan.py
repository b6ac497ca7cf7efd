"""What a try needs, worked out before it runs: its DAG file loaded (cached per file and modification time,
so a LocalExecutor worker imports a version's code once and its forked children inherit it), its task and
its context.

`prepare(item)` runs in the long-lived process that is about to fork (or to run the try itself) and keeps
the plan for the try; `prepared(item)` gives it back to the child (or to `run_try`).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import dagbag
from ledger.scheduler.runtime.dagbag import FileResult, load_file
from ledger.scheduler.runtime.try_logging import capture_logging, output_streams, set_aside
from ledger.scheduler.runtime.try_outcome import describe_exception, one_line
from ledger.sdk import templates
from ledger.sdk.context import TaskContext, set_environment
from ledger.sdk.dag import PythonTask, Task
from ledger.sdk.params import resolve as resolve_params
from ledger.sdk.spark import SparkTask
from ledger.sdk.xcom import decoded

DEFAULT_IMPORT_TIMEOUT = 60.0  # seconds a worker gives a DAG file to import before failing the try


class _ImportTimeout(BaseException):
    """Raised by SIGALRM in a worker whose DAG file import hangs (BaseException: load_file must not catch it)."""


# -- DAG files: loaded once per (file, modification) in the process that forks ----------------------

@dataclass
class _Cached:
    key: tuple[int, int, int]
    result: FileResult


_cache: dict[str, _Cached] = {}
_parameters: dict[Callable[..., Any], Parameters | None] = {}  # by task callable: see parameters()


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


def save_output() -> tuple[list[int], Any, Any]:
    """This process's fd 0, 1 and 2 and sys.stdout and sys.stderr, flushed, for restore_output()."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return [os.dup(fd) for fd in (0, 1, 2)], sys.stdout, sys.stderr


def restore_output(saved: tuple[list[int], Any, Any]) -> None:
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


@contextlib.contextmanager
def _output_to(capture: io.StringIO) -> Iterator[None]:
    """Everything written while the block runs, to sys.stdout and sys.stderr or to fd 1 and 2 (os.write, C code,
    child processes), goes to `capture`, in order: the worker's own fd 1 and 2 are the scheduler's log, which a
    DAG file's output never reaches (decision 103); it goes to the log of the try that caused the import."""
    saved = save_output()
    with tempfile.TemporaryFile() as spool:
        os.dup2(spool.fileno(), 1)
        os.dup2(spool.fileno(), 2)
        sys.stdout, sys.stderr = (open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                                       closefd=False) for fd in (1, 2))
        try:
            yield
        finally:
            restore_output(saved)
            spool.seek(0)
            capture.write(spool.read().decode("utf-8", "backslashreplace"))


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
    unsettle()  # (the file's code runs here)
    try:
        with _alarm(timeout), set_aside():  # (its logging is not a try's)
            if capture is None:
                result = load_file(fileloc, root)
            else:
                with _output_to(capture):
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
    settled: bool = False  # the process that forks the try has made itself what the try's process starts as (settle)

    @property
    def in_process(self) -> bool:
        """Runs in the process that made the plan, not in a forked child (Spark tries)."""
        return isinstance(self.task, SparkTask)


def runs_in_process(plan: Plan, *, reuse: bool = False) -> bool:
    """Whether the try runs in the worker process itself rather than in a forked child: Spark tries always;
    with `reuse` (LEDGER_REUSE_WORKERS), Python tries too, and tries that fail before running."""
    if plan.in_process:
        return True
    return reuse and (plan.error is not None or isinstance(plan.task, PythonTask))


_plans: dict[tuple[int, int], Plan] = {}  # made by prepare() just before a fork, read by the child


def make_plan(item: WorkItem, *, import_timeout: float | None = None, capture: bool = False) -> Plan:
    """Load the DAG file (cached), find the task, build its context."""
    buffer = io.StringIO() if capture else None
    result = load_dag_file(item.fileloc, root=item.code_root, timeout=import_timeout, capture=buffer)
    plan = Plan(item, output=buffer.getvalue() if buffer is not None else "", loaded=result)
    if result.error:
        plan.error = one_line(f"cannot load DAG file of {_where(item)}: {result.error}")
        return plan
    dag = None
    for candidate in result.dags:  # (a loop: a generator left by next() raises GeneratorExit in itself as it is
        if candidate.dag_id == item.dag_id:  # closed, objects a worker would make before every fork)
            dag = candidate
            break
    if dag is None:
        plan.error = one_line(f"DAG {item.dag_id} is not defined by the code of {_where(item)}")
        return plan
    plan.task = dag.tasks.get(item.task_id)
    if plan.task is None:
        plan.error = one_line(f"task {item.task_id} is not in the code of {_where(item)}")
        return plan
    templates.preload(plan.task)  # (the child inherits the Jinja environment its templates need, if any)
    task_params = getattr(plan.task, "params", None) or {}  # an Airflow operator's own params, over the DAG's
    plan.context = make_context(item, resolve_params({**dag.params, **task_params}, item.conf),
                                operator=type(plan.task).__name__)
    fn = getattr(plan.task, "python_callable", None)  # a PythonTask's or a PythonSensor's
    if callable(fn):
        found = parameters(fn)  # (worked out here, in the worker that forks the try: the child inherits it)
        plan.pass_context = isinstance(plan.task, PythonTask) and "context" not in plan.task.op_kwargs \
            and found is not None and (found.takes_all or "context" in found.names)
    return plan


def _where(item: WorkItem) -> str:
    return f"version {item.dag_version[:12]} ({item.fileloc})"


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


def settle(plan: Plan) -> None:
    """In a worker process of its own that forks the try next (the LocalExecutor's), before the fork: make this
    process what the try's process starts as, the loaded file's code root and modules active, the try's LEDGER_*
    variables set and its logging handler installed (decision 0324), so that the child inherits them instead of
    making them after the fork (each page a child writes is copied for it: issue 43). The worker's next try, forked
    or run in the worker, sets its own. Only the variables that differ from those it set for its last try are
    written (`_settled_env`), unless something else may have run in this process since (`unsettle`)."""
    global _settled_env, _settled_again
    _settled_again = _settled_env is not None
    if _settled_env is None:
        capture_logging(output_streams()[1])  # the try's logging handler, which its process finds in place
    if plan.loaded is not None and plan.error is None:
        dagbag.activate(plan.loaded)
    if plan.context is not None:
        wanted = plan.context.env()
        if _settled_env is None:
            set_environment(plan.context)
        else:
            for key in _settled_env:
                if key not in wanted:
                    os.environ.pop(key, None)
            for key, value in wanted.items():
                if _settled_env.get(key) != value:
                    os.environ[key] = value
        _settled_env = wanted
    plan.settled = True


# the try variables settle() set last in this process, its logging handler installed since (None: not known)
_settled_env: dict[str, str] | None = None
_settled_again = False  # the last settle() found this process as the one before left it


def settled_again() -> bool:
    """Whether the last settle() found this process as the settle() before it left it: only the worker's own loop
    ran in it since it forked its last try (no DAG file imported, no try run in it)."""
    return _settled_again


def unsettle() -> None:
    """Code other than settle() may have changed this process's environment or its logging (a try run in it, a DAG
    file imported): the next settle() sets every try variable and installs the try's logging handler again."""
    global _settled_env
    _settled_env = None


def forget_prepared() -> None:
    _plans.clear()


def clear_cache() -> None:
    unsettle()
    _cache.clear()
    _plans.clear()
    _parameters.clear()


def code_line(item: WorkItem) -> str:
    """The log line that says which code a try runs."""
    if item.code_root is None:
        return f"version {item.dag_version}: this version has no stored code; running {item.fileloc}"
    note = "" if item.code_captured else " (registered before helper modules were captured: its DAG file only)"
    return f"version {item.dag_version}: code {item.code_root}{note}"


def make_context(item: WorkItem, params: dict[str, Any] | None = None, operator: str | None = None) -> TaskContext:
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
        xcom_values={task: {key: decoded(value) for key, value in values.items()}
                     for task, values in item.xcom.items()},
        prev_interval=item.prev_interval,
        prev_success=item.prev_success,
        map_index=item.map_index,
        triggering_dataset_events=dict(item.triggering_events or {}),
        inlet_dataset_events=dict(item.inlet_events or {}),
        tries_allowed=item.max_tries,
        run_started=item.run_started,
        operator=operator,
    )


@dataclass(frozen=True, slots=True)
class Parameters:
    """What a task's callable takes, as the try passes it arguments by name."""

    takes_all: bool  # it has **kwargs
    names: tuple[str, ...]  # its parameters that can be passed by keyword, in order


def parameters(fn: Callable[..., Any]) -> Parameters | None:
    """The parameters of `fn` (None: it has no signature to read), read once per callable in this process: a worker
    reads them as it plans a try, before forking, and the try's process finds them here instead of reading the
    signature again."""
    try:
        if fn in _parameters:
            return _parameters[fn]
    except TypeError:  # an unhashable callable
        return _read_parameters(fn)
    found = _parameters[fn] = _read_parameters(fn)
    return found


def _read_parameters(fn: Callable[..., Any]) -> Parameters | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return Parameters(any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params), tuple(
        p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)))


def prepared(item: WorkItem) -> Plan | None:
    """The plan prepare() (or remember()) made for this try in this process, if any."""
    return _plans.get((item.ti_id, item.try_number))


def remember(plan: Plan) -> None:
    _plans[(plan.item.ti_id, plan.item.try_number)] = plan
