"""Airflow's operators on ledger's tasks: BaseOperator (subclasses with `execute(context)`, `template_fields`,
`template_ext`), EmptyOperator, BashOperator, PythonOperator, EmailOperator (LatestOnlyOperator is a branch:
ledger/airflow_compat/flow.py).

Every operator takes Airflow's BaseOperator arguments. Those ledger acts on go to ledger's Task (retries,
trigger_rule, pool, queue, callbacks, ...), the operator's own over its task groups' and its DAG's default_args, as
in Airflow; `owner`, `doc_md` (and doc, doc_rst...), `task_display_name`, `params` (the task's params, over the
DAG's) and `sla` (the DAG's deadline: ledger/airflow_compat/dag.py) are kept in the version; the others ledger has
no use for (executor_config, weight_rule, ...) are accepted and listed in the task's `ignored_args`. An argument
Airflow does not know either is refused, as Airflow refuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from ledger.airflow_compat import NO_STATE_STORES, STATE_STORE_NAMES
from ledger.airflow_compat.bash import AIRFLOW_SKIP_EXIT_CODE, inherits_environment, skip_exit_codes
from ledger.airflow_compat.callbacks import airflow_callbacks
from ledger.airflow_compat.dag import delays_in_seconds
from ledger.airflow_compat.retry_policy import RetryPolicy, check_policy, decide
from ledger.core.errors import DagDefinitionError
from ledger.sdk import dag as ledger_dag
from ledger.sdk.context import TaskContext, current
from ledger.sdk.params import as_params, resolve_refs
from ledger.sdk.templates import render, template_names
from ledger.sdk.xcom import RETURN_KEY, XComRef, resolve

# Airflow's BaseOperator arguments that ledger's Task takes as they are
LEDGER_TASK_ARGS = ("dag", "retries", "retry_delay", "depends_on_past", "wait_for_downstream", "trigger_rule", "pool",
                    "queue", "priority_weight", "execution_timeout", "retry_exponential_backoff", "max_retry_delay",
                    "on_failure_callback", "on_success_callback", "on_retry_callback", "email", "email_on_failure",
                    "email_on_retry", "signals", "outlets", "inlets", "max_active_tis_per_dag",
                    "max_active_tis_per_dagrun", "pool_slots")
# Airflow 2's name for max_active_tis_per_dag, taken when that is not given (as Airflow takes it)
TASK_CONCURRENCY = "task_concurrency"
# Airflow's BaseOperator arguments ledger keeps for people (shown by `ledger dags show`) or acts on in this module
KEPT_TASK_ARGS = ("owner", "doc", "doc_md", "doc_rst", "doc_json", "doc_yaml", "task_display_name", "params", "sla",
                  "multiple_outputs", "do_xcom_push", "task_group", "default_args", "retry_policy",
                  "pre_execute", "post_execute")
# Airflow's BaseOperator arguments accepted and not acted on
IGNORED_TASK_ARGS = ("executor_config", "weight_rule", "run_as_user", "resources", "executor",
                     "on_execute_callback", "on_skipped_callback", "map_index_template",
                     "show_return_value_in_logs", "wait_for_past_depends_before_skipping", "email_on_success",
                     "ignore_first_depends_on_past", "allow_nested_operators", "logger_name", "ui_color",
                     "ui_fgcolor", "start_date", "end_date")


_LIMITS = ("max_active_tis_per_dag", "max_active_tis_per_dagrun")
# given as 1 (every instance took one slot) or None, pool_slots is listed as ignored, as it was before it acted: the
# version of such a DAG file keeps its hash (decision 0364)
POOL_SLOTS = "pool_slots"


def _task_concurrency(kwargs: Mapping[str, Any], defaults: Mapping[str, Any]) -> Any:
    """Airflow 2's `task_concurrency` when it is to be taken as max_active_tis_per_dag: it is given (on the operator,
    else in a default_args) and max_active_tis_per_dag is not (on the operator, else in a default_args), as Airflow
    applies default_args first and then falls back to it. None otherwise."""
    def given(name: str) -> Any:
        return kwargs[name] if name in kwargs else defaults.get(name)

    concurrency = given(TASK_CONCURRENCY)
    return concurrency if concurrency and not given("max_active_tis_per_dag") else None


def _frame_folder() -> str | None:
    """The folder of the DAG file being imported (the frame of its module), for template files."""
    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(ledger_dag.DAG_MODULE_PREFIX):
            return os.path.dirname(str(frame.f_globals.get("__file__", "")))
        frame = frame.f_back  # type: ignore[assignment]
    return None


def operator_dag(kwargs: Mapping[str, Any]) -> Any:
    """The DAG an operator made with `kwargs` joins: its `dag=`, else the DAG being defined (`with DAG`); None
    when there is none."""
    return kwargs.get("dag") or (ledger_dag._context_stack[-1] if ledger_dag._context_stack else None)


def template_file(task_id: str, field: str, value: Any, exts: Sequence[str], folder: str | None,
                  dag: Any = None) -> Any:
    """A templated string ending with one of `exts` is the name of a file whose text is the template instead, as
    Airflow reads it: looked for in the DAG file's folder, then in the `template_searchpath` folders of `dag` (the
    operator's: operator_dag). A file of the DAGs folder is part of the DAG's code (a version keeps it with the DAG
    file); the text read is the task's field either way. Other values are returned as they are."""
    if not isinstance(value, str) or not exts or not value.endswith(tuple(exts)):
        return value  # (a space after "run.sh " makes it a command: Airflow's way to run a script as it is)
    folders = [folder or ".", *getattr(dag, "template_searchpath", ())]
    paths = [os.path.join(f, value.strip()) for f in folders]
    path = next((p for p in paths if os.path.isfile(p)), paths[0])
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise DagDefinitionError(f"task {task_id!r}: cannot read the template file {value!r} of {field}: "
                                 f"{exc.strerror} (looked in {', '.join(folders)})") from None
    ledger_dag.read_files.append(path)
    return text


@contextlib.contextmanager
def _in_group(group: Any) -> Iterator[None]:
    """`task_group=tg` as Airflow takes it: the task is made as if inside `with tg:`."""
    if group is None:
        yield
        return
    with group:
        yield


class AirflowArgs:
    """What every Airflow operator does with Airflow's BaseOperator arguments (see the module docstring)."""

    owner: str = ""
    doc_md: str = ""
    display_name: str = ""
    sla: timedelta | None = None
    multiple_outputs: bool = False
    do_xcom_push: bool = True
    ignored_args: tuple[str, ...] = ()
    params: dict[str, Any] = {}
    retry_policy: RetryPolicy | None = None
    pre_execute_hook: Callable[..., Any] | None = None
    post_execute_hook: Callable[..., Any] | None = None

    @staticmethod
    def split(cls_name: str, task_id: str | None, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the arguments for ledger's Task, the Airflow ones this class keeps); refuses unknown ones."""
        if not task_id:
            raise DagDefinitionError(f"{cls_name} needs a task_id")
        dag = kwargs.get("dag") or (ledger_dag._context_stack[-1] if ledger_dag._context_stack else None)
        defaults = dict(getattr(dag, "airflow_default_args", None) or {})
        unknown = sorted(set(kwargs) - set(LEDGER_TASK_ARGS) - set(KEPT_TASK_ARGS) - set(IGNORED_TASK_ARGS)
                         - {TASK_CONCURRENCY})
        if unknown:
            raise DagDefinitionError(f"task {task_id!r}: invalid arguments were passed to {cls_name}: "
                                     f"{', '.join(unknown)}")
        ledger_args = {k: v for k, v in kwargs.items() if k in LEDGER_TASK_ARGS}
        # default_args of the enclosing task groups and of the operator itself, over the DAG's (which ledger's
        # Task applies itself), as Airflow takes them
        groups = [g for g in ledger_dag._group_stack if g.dag is dag] if dag is not None else []
        extra: dict[str, Any] = {}
        for group in groups:
            extra.update(getattr(group, "default_args", None) or {})
        extra.update(kwargs.get("default_args") or {})
        for key, value in extra.items():
            if key in LEDGER_TASK_ARGS and key != "dag" and key not in ledger_args:
                ledger_args[key] = value
        defaults.update(extra)
        took = _task_concurrency(kwargs, defaults)
        if took is not None:
            ledger_args["max_active_tis_per_dag"] = took
        kept = {k: v for k, v in kwargs.items() if k in KEPT_TASK_ARGS}
        for key in ("owner", "sla", "retry_policy"):
            if key not in kept and key in defaults:
                kept[key] = defaults[key]
        # (a limit given as None, and a task_concurrency not taken, are listed as ignored, as they always were: a DAG
        # that passes them keeps its version hash)
        kept["ignored"] = tuple(sorted(k for k in kwargs if k in IGNORED_TASK_ARGS or (
            k in _LIMITS and kwargs[k] is None) or (k == TASK_CONCURRENCY and took is None) or (
            k == POOL_SLOTS and kwargs[k] in (None, 1))))
        return delays_in_seconds(ledger_args), kept

    def keep(self, kept: Mapping[str, Any]) -> None:
        self.owner = str(kept.get("owner") or "")
        doc = next((kept[k] for k in ("doc_md", "doc", "doc_rst", "doc_json", "doc_yaml") if kept.get(k)), "")
        self.doc_md = inspect.cleandoc(doc) if isinstance(doc, str) else ""
        self.display_name = str(kept.get("task_display_name") or "")
        sla = kept.get("sla")
        if sla is not None and not isinstance(sla, timedelta):
            raise DagDefinitionError(f"task {getattr(self, 'task_id', '?')!r}: sla must be a timedelta")
        self.sla = sla
        self.multiple_outputs = bool(kept.get("multiple_outputs", False))
        self.do_xcom_push = bool(kept.get("do_xcom_push", True))
        self.ignored_args = tuple(kept.get("ignored", ()))
        self.params = as_params(kept.get("params"), where=f"task {getattr(self, 'task_id', '?')!r}")
        self.retry_policy = check_policy(getattr(self, "task_id", "?"), kept.get("retry_policy"))
        for name in ("pre_execute", "post_execute"):
            hook = kept.get(name)
            if hook is not None and not callable(hook):
                raise DagDefinitionError(f"task {getattr(self, 'task_id', '?')!r}: {name} must be callable")
            setattr(self, f"{name}_hook", hook)

    def airflow_settings(self) -> dict[str, Any]:
        """What the version records of the Airflow arguments (only those given)."""
        return {k: v for k, v in (
            ("owner", self.owner), ("doc_md", self.doc_md), ("display_name", self.display_name),
            ("sla", self.sla.total_seconds() if self.sla is not None else None),
            ("multiple_outputs", self.multiple_outputs),
            ("params", {n: p.describe() for n, p in sorted(self.params.items())}),
            ("retry_policy", self.retry_policy.serialize() if self.retry_policy is not None else None),
            ("pre_execute", ledger_dag.describe_callback(self.pre_execute_hook) if self.pre_execute_hook else None),
            ("post_execute", ledger_dag.describe_callback(self.post_execute_hook) if self.post_execute_hook else None),
            ("ignored_args", list(self.ignored_args))) if v} | (
            {"do_xcom_push": False} if not self.do_xcom_push else {})

    def render_template(self, content: Any, context: Mapping[str, Any], jinja_env: Any = None,
                        seen_oids: Any = None) -> Any:
        """Airflow's `operator.render_template(content, context)`: `content` (a string, or lists and dicts of
        them) rendered with the names of `context` and the DAG's filters (Airflow's other arguments: unused)."""
        return render(content, context, field="render_template",
                      filters=getattr(getattr(self, "dag", None), "user_defined_filters", None) or {})

    def airflow_hooks(self, when: str, result: Any) -> None:
        """Airflow's hooks around the task's work (scheduler/runtime/task_runner.py calls them): before it
        ("pre"), the `pre_execute=` function and the class's own pre_execute(context); after it succeeded ("post"),
        the `post_execute=` function and post_execute(context, result), `result` the value it passed on. One that
        raises fails the try, as in Airflow."""
        context = get_current_context()
        if when == "pre":
            if self.pre_execute_hook is not None:
                self.pre_execute_hook(context)
            self.pre_execute(context)
        else:
            if self.post_execute_hook is not None:
                self.post_execute_hook(context, result)
            self.post_execute(context, result)

    def pre_execute(self, context: Any) -> None:
        """Airflow's hook before execute(): override it in a subclass."""

    def post_execute(self, context: Any, result: Any = None) -> None:
        """Airflow's hook after execute(): override it in a subclass."""

    def retry_decision(self, exc: BaseException, context: TaskContext) -> tuple[str, float | None] | None:
        """What the task's `retry_policy` makes of a failure's exception (scheduler/runtime/task_runner.py asks):
        ("fail" | "retry" | "default", the retry's delay in seconds or None); None without a policy."""
        if self.retry_policy is None:
            return None
        found = decide(self.retry_policy, exc, context.try_number, int(getattr(self, "retries", 0) or 0),
                       get_current_context())
        if found is None:
            return None
        return found.action.value, found.retry_delay.total_seconds() if found.retry_delay is not None else None

    @property
    def task_group(self) -> Any:
        """Airflow's `task.task_group`: the TaskGroup the task was made in (None: at the DAG's top)."""
        return getattr(self, "group", None)

    def __getitem__(self, key: str) -> XComArg:
        """`task["key"]`: the value it passes on under `key` (with multiple_outputs, a key of its dict)."""
        return XComArg(self.task_id, key)  # type: ignore[attr-defined]

    @property
    def output(self) -> XComArg:
        return XComArg(self.task_id)  # type: ignore[attr-defined]


def _make(self: Any, base: type[ledger_dag.Task], task_id: str | None, kwargs: dict[str, Any],
          own: dict[str, Any]) -> None:
    """Build an Airflow operator on ledger's task class `base` (own: that class's own arguments)."""
    ledger_args, kept = AirflowArgs.split(type(self).__name__, task_id, kwargs)
    assert task_id is not None
    with _in_group(kept.get("task_group")):
        base.__init__(self, task_id, **own, **ledger_args)
    self.callbacks = airflow_callbacks(self.callbacks, self)
    self.keep(kept)


def _awaited(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An async callable as a plain one: each call runs the coroutine in an event loop of its own, as Airflow 3.2+
    runs an async task function, and returns what it returned."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))
    return run


def _refuse_state_stores(task_id: str | None, fn: Callable[..., Any]) -> None:
    """A callable asking for Airflow 3.3's task_state_store or asset_state_store by parameter is refused at parse
    time (decision 0312): given None, as a name the context does not have, it would fail or skip its work later."""
    with contextlib.suppress(TypeError, ValueError):  # a callable with no signature asks for nothing by name
        asked = [n for n in inspect.signature(fn).parameters if n in STATE_STORE_NAMES]
        if asked:
            raise DagDefinitionError(f"task {task_id!r}: the parameter {asked[0]}: {NO_STATE_STORES}")


class PythonOperator(AirflowArgs, ledger_dag.PythonTask):
    """Airflow's PythonOperator: ledger's PythonTask with Airflow's arguments."""

    def __init__(self, *, task_id: str | None = None, python_callable: Callable[..., Any] | None = None,
                 op_args: Sequence[Any] | None = None, op_kwargs: dict[str, Any] | None = None,
                 templates_dict: dict[str, Any] | None = None, templates_exts: Any = None,
                 show_return_value_in_logs: bool = True, **kwargs: Any) -> None:
        if python_callable is None:
            raise DagDefinitionError(f"task {task_id!r}: PythonOperator needs a python_callable")
        _refuse_state_stores(task_id, python_callable)
        if inspect.iscoroutinefunction(python_callable):  # Airflow 3.2+: an async callable runs to its end
            python_callable = _awaited(python_callable)
        if templates_exts and templates_dict:  # Airflow's templates_exts: those values name template files
            folder = _frame_folder()
            templates_dict = {k: template_file(str(task_id), f"templates_dict[{k!r}]", v, list(templates_exts),
                                               folder, operator_dag(kwargs)) for k, v in templates_dict.items()}
        _make(self, ledger_dag.PythonTask, task_id, kwargs,
              {"python_callable": python_callable, "op_args": op_args or (), "op_kwargs": op_kwargs,
               "templates_dict": templates_dict})

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), **self.airflow_settings()}


class BashOperator(AirflowArgs, ledger_dag.BashTask):
    """Airflow's BashOperator: ledger's BashTask with Airflow's arguments. `skip_on_exit_code` (99 unless given)
    names the exit codes that skip it; with `env`, the command runs in `env` alone unless `append_env=True`
    (ledger/airflow_compat/bash.py). The last line of its output is passed on unless do_xcom_push=False (through
    `output_processor` when given). A bash_command ending with `.sh` or `.bash` is a script file beside the DAG
    file, rendered and run (template_file)."""

    template_ext: ClassVar[Sequence[str]] = (".sh", ".bash")

    def __init__(self, *, task_id: str | None = None, bash_command: Any = None, env: dict[str, str] | None = None,
                 cwd: str | None = None, append_env: bool = False, output_encoding: str = "utf-8",
                 skip_on_exit_code: Any = AIRFLOW_SKIP_EXIT_CODE,
                 output_processor: Callable[[str], Any] | None = None, **kwargs: Any) -> None:
        # a command ending with .sh or .bash names a script file whose text is rendered and run, as Airflow's
        bash_command = template_file(str(task_id), "bash_command", bash_command, self.template_ext, _frame_folder(),
                                     operator_dag(kwargs))
        skip_codes = skip_exit_codes(task_id, skip_on_exit_code)
        _make(self, ledger_dag.BashTask, task_id, kwargs, {"bash_command": bash_command, "env": env, "cwd": cwd})
        self.skip_exit_codes = skip_codes  # (the task runner reads these two)
        self.inherit_env = inherits_environment(env, append_env)
        self.append_env = bool(append_env)
        self.push_last_line = self.do_xcom_push  # as Airflow's: the last line of its output is passed on
        self.output_processor = output_processor  # ... through this function first, when given

    def settings(self) -> dict[str, Any]:
        """Also `skip_on_exit_code` and `append_env` when given other than Airflow's defaults."""
        given = {**({"skip_on_exit_code": list(self.skip_exit_codes)}
                    if self.skip_exit_codes != (AIRFLOW_SKIP_EXIT_CODE,) else {}),
                 **({"append_env": True} if self.append_env else {})}
        return {**super().settings(), **self.airflow_settings(), **given}


class BaseOperator(AirflowArgs, ledger_dag.Task):
    """Airflow's BaseOperator: subclass it and write `execute(self, context)`; its return value is passed on.
    `template_fields` name the attributes rendered with Jinja before execute; a templated string ending with one
    of `template_ext` is the name of a file (relative to the DAG file's folder) whose text is rendered instead: the
    file is part of the DAG's code (a version keeps it with the DAG file, and a try reads the version's copy)."""

    kind = "operator"
    template_fields: ClassVar[tuple[str, ...]] = ()
    template_ext: ClassVar[Sequence[str]] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {}
    ui_color: ClassVar[str] = "#fff"
    _depth = 0  # how deep in nested __init__ calls construction is (the outermost one finishes it)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _finishing(cls.__dict__["__init__"])  # type: ignore[method-assign]
        # `Op.partial(...).expand(arg=[...])` maps the arguments of the subclasses' own constructors, as Airflow's
        # (PartialTask.expand refuses one that the class does not keep under its own name)
        own = [name for klass in cls.__mro__[:cls.__mro__.index(BaseOperator)] if "__init__" in klass.__dict__
               for name, p in inspect.signature(klass.__dict__["__init__"]).parameters.items()
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in ("self", "task_id")]
        cls.mappable_fields = tuple(dict.fromkeys((*cls.mappable_fields, *own)))

    def __init__(self, *, task_id: str | None = None, **kwargs: Any) -> None:
        _make(self, ledger_dag.Task, task_id, kwargs, {})
        self._base_names = set(vars(self))

    def finish(self) -> None:
        """After the outermost __init__: link the tasks whose values its templated fields take (XComArg), and
        read template files."""
        folder = _frame_folder()
        for name in self.template_fields:
            value = getattr(self, name, None)
            ledger_dag.after_values(self, value)
            setattr(self, name, template_file(self.task_id, name, value, self.template_ext, folder, self.dag))

    def execute(self, context: Mapping[str, Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, context)")

    def run_operator(self, context: TaskContext, names: Mapping[str, Any]) -> Any:
        """Run execute() with Airflow's context (the task runner calls it); its value is passed on unless
        do_xcom_push=False."""
        value = self.execute(self.context_for(context, names))
        return value if self.do_xcom_push else None

    def context_for(self, context: TaskContext, names: Mapping[str, Any]) -> AirflowContext:
        """Airflow's context for the try, once the fields' other tasks' values (XComArg) and params (an @dag
        function's parameters) are resolved, as Airflow resolves them."""
        for name in self.template_fields:
            value = getattr(self, name, None)
            setattr(self, name, resolve_refs(resolve(value, context.xcom_values), context.params))
        return airflow_context(context, names)

    def definition(self) -> dict[str, Any]:
        fields = {k: ledger_dag._jsonable(v) for k, v in sorted(vars(self).items())
                  if k not in getattr(self, "_base_names", ()) and not k.startswith("_")}
        return {"operator": ledger_dag._callable_definition(type(self)), "fields": fields}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), **self.airflow_settings()}

    @property
    def log(self) -> Any:
        import logging

        return logging.getLogger(f"airflow.task.operators.{type(self).__module__}.{type(self).__name__}")


def _finishing(init: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: BaseOperator, *args: Any, **kwargs: Any) -> None:
        self._depth += 1
        try:
            init(self, *args, **kwargs)
        finally:
            self._depth -= 1
        if self._depth == 0:
            self.finish()
    __init__.__wrapped__ = init  # type: ignore[attr-defined]
    return __init__


class TaskGroup(ledger_dag.TaskGroup):
    """Airflow's TaskGroup: ledger's, also taking `default_args` (for the operators made inside it) and Airflow's
    display arguments (accepted, not used)."""

    def __init__(self, group_id: str, tooltip: str = "", *, prefix_group_id: bool = True, dag: Any = None,
                 default_args: dict[str, Any] | None = None, parent_group: Any = None, ui_color: str = "",
                 ui_fgcolor: str = "", add_suffix_on_collision: bool = False) -> None:
        super().__init__(group_id, dag=dag, prefix_group_id=prefix_group_id, tooltip=tooltip)
        self.default_args = dict(default_args or {})


class AirflowContext(dict[str, Any]):
    """Airflow's task context (`context["ti"]`, `context["ds"]`, ...): a dict of the template names."""


def airflow_context(context: TaskContext, names: Mapping[str, Any]) -> AirflowContext:
    return AirflowContext({**names, "templates_dict": context.templates_dict or None})


def get_current_context() -> AirflowContext:
    """Airflow's get_current_context(): the context of the try running in this process."""
    found = current()
    if found is None:
        raise RuntimeError("get_current_context() works only inside a running task")
    context, task = found
    names = template_names(
        logical_date=context.logical_date, data_interval_start=context.data_interval_start,
        data_interval_end=context.data_interval_end, prev_interval=context.prev_interval, run_id=context.run_id,
        prev_success=context.prev_success, run_type=context.run_type, try_number=context.try_number,
        dag_version=context.dag_version, dag=getattr(task, "dag", None), task=task, params=context.params,
        conf=context.conf, ti=context, run_started=context.run_started)
    return airflow_context(context, names)


class EmptyOperator(BaseOperator):
    """Does nothing (its trigger rule still decides whether it runs or is skipped)."""

    def execute(self, context: Mapping[str, Any]) -> None:
        return None


DummyOperator = EmptyOperator  # Airflow 1 and early 2's name


class EmailOperator(BaseOperator):
    """Sends an e-mail through the SMTP connection `conn_id` (Airflow's SMTP provider), or, when that is not named
    or is `smtp_default` and not defined, through ledger's SMTP settings (LEDGER_SMTP_*: the EmailNotifier's)."""

    template_fields: ClassVar[tuple[str, ...]] = ("to", "from_email", "subject", "html_content", "files", "cc",
                                                  "bcc", "custom_headers")
    template_ext: ClassVar[Sequence[str]] = (".html",)

    def __init__(self, *, to: str | list[str], subject: str, html_content: str, from_email: str | None = None,
                 files: list[str] | None = None, cc: str | list[str] | None = None,
                 bcc: str | list[str] | None = None, mime_subtype: str = "mixed", mime_charset: str = "utf-8",
                 conn_id: str | None = None, custom_headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
        from ledger.airflow_compat.smtp import check_subtype

        check_subtype(mime_subtype)
        super().__init__(**kwargs)
        self.to, self.from_email, self.subject, self.html_content = to, from_email, subject, html_content
        self.files, self.cc, self.bcc = files or [], cc, bcc
        self.mime_charset, self.conn_id, self.custom_headers = mime_charset, conn_id, custom_headers

    def execute(self, context: Mapping[str, Any]) -> None:
        from ledger.airflow_compat.smtp import listed, send_email

        send_email(self.to, self.subject, self.html_content, files=list(self.files), cc=self.cc, bcc=self.bcc,
                   mime_charset=self.mime_charset, conn_id=self.conn_id, custom_headers=self.custom_headers,
                   from_email=self.from_email)
        self.log.info("sent e-mail %r to %s", self.subject, ", ".join(listed(self.to)))


class XComArg(XComRef):
    """Airflow's XComArg: a value a task passes on, which also stands for the task in `>>` and `<<`."""

    def operator(self) -> Any:
        dag = ledger_dag._context_stack[-1] if ledger_dag._context_stack else None
        if dag is None or self.task_id not in dag.tasks:
            raise DagDefinitionError(f"the value of {self.task_id!r} is not of a task of the DAG being defined")
        return dag.tasks[self.task_id]

    def __rshift__(self, other: Any) -> Any:
        return self.operator() >> (other.operator() if isinstance(other, XComArg) else other)

    def __lshift__(self, other: Any) -> Any:
        return self.operator() << (other.operator() if isinstance(other, XComArg) else other)

    def __rrshift__(self, other: Any) -> Any:
        return other >> self.operator()

    def __rlshift__(self, other: Any) -> Any:
        return other << self.operator()

    def __getitem__(self, key: str) -> XComArg:
        return XComArg(self.task_id, key)


def xcom_arg(operator: Any, key: str = RETURN_KEY) -> XComArg:
    """Airflow's XComArg(operator, key): the value the task passes on under `key`."""
    return XComArg(operator.task_id, key)
