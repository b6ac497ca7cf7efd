"""Jinja templates in task fields, with Airflow's names: `{{ ds }}`, `{{ params.n }}`, `{{ macros.ds_add(ds, 1) }}`.

A task class lists its templated fields in `template_fields` (BashTask: bash_command, env; PythonTask:
op_args, op_kwargs, templates_dict). Strings are rendered, lists and dicts recursively; an undefined name
is an error (StrictUndefined), never an empty string. What was rendered is stored with the try.

Names: ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start, data_interval_end,
prev_data_interval_start, prev_data_interval_end (of the previous run in the chain; None for the first),
run_id, run_type, try_number, dag_version, dag, task, ti (ti.xcom_pull(task_ids=...)), params, conf,
var (var.value.NAME, var.json.NAME:
LEDGER_VAR_<NAME>, AIRFLOW_VAR_<NAME> or `ledger variables`), conn (conn.NAME.host ...: LEDGER_CONN_<NAME>,
`ledger connections` or AIRFLOW_CONN_<NAME>), macros.ds_add, macros.ds_format,
macros.datetime, macros.timedelta.

Airflow's other names are there too (Airflow's "Templates reference"): ts_nodash_with_tz,
task_instance_key_str (`dag__task__YYYYMMDD`), dag_run (conf, run_id, run_type, logical_date, data interval,
dag_id, external_trigger, id, state, start_date, end_date), ti's Airflow attributes (start_date, end_date, duration,
hostname, max_tries, log_url, operator, execution_date: ledger/sdk/context.py), map_index_template,
expanded_ti_count, test_mode, exception, inlets, outlets, triggering_dataset_events, inlet_events,
outlet_events (ledger/sdk/datasets.py), and Airflow 2's deprecated date names (execution_date, next_ds, prev_ds,
yesterday_ds, tomorrow_ds and their _nodash forms, next_execution_date, prev_execution_date);
prev_data_interval_start_success, prev_data_interval_end_success, prev_start_date_success and
prev_end_date_success come from the run's prior successful run (ledger/store/prior_runs.py; None when there is
none, and in `ledger dags test`, which reads no database).
Macros: ds_add, ds_format, datetime, timedelta, time, uuid, random, json, dateutil, datetime_diff_for_humans,
and a DAG's user_defined_macros. Filters: ds, ds_nodash, ts, ts_nodash, ts_nodash_with_tz, Jinja's, and a DAG's
user_defined_filters (over Jinja's of the same name). `var.value.get('name', 'default')` gives the default for a
variable that is not set.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pendulum

if TYPE_CHECKING:
    import jinja2


class TemplateError(ValueError):
    pass


def ds_add(ds: str, days: int) -> str:
    """`ds` (YYYY-MM-DD) plus `days` (negative: minus)."""
    return (dt.date.fromisoformat(ds) + dt.timedelta(days=days)).isoformat()


def ds_format(ds: str, input_format: str, output_format: str) -> str:
    return dt.datetime.strptime(ds, input_format).strftime(output_format)


def datetime_diff_for_humans(dt_value: dt.datetime, since: dt.datetime | None = None) -> str:
    """How long before (or after) `since` (default: now) `dt_value` is, in words ("2 days ago")."""
    other = pendulum.instance(since) if since is not None else pendulum.now("UTC")
    return pendulum.instance(dt_value).diff_for_humans(other)


class _Macros:
    ds_add = staticmethod(ds_add)
    ds_format = staticmethod(ds_format)
    datetime_diff_for_humans = staticmethod(datetime_diff_for_humans)
    datetime = dt.datetime
    timedelta = dt.timedelta
    time = time
    uuid = uuid
    random = random
    json = json

    @property
    def dateutil(self) -> Any:
        import dateutil  # pendulum's dependency

        return dateutil


class _UserMacros(_Macros):
    """The macros with a DAG's user_defined_macros beside them."""

    def __init__(self, extra: Mapping[str, Any]) -> None:
        self.__dict__.update(extra)


_NO_DEFAULT: Any = object()


class _Variables:
    """`var.value.NAME` (text) and `var.json.NAME` (parsed), as Variable.get reads them: LEDGER_VAR_<NAME>, then
    AIRFLOW_VAR_<NAME>, then the ledger."""

    def __init__(self, as_json: bool = False) -> None:
        self._json = as_json

    def __getattr__(self, name: str) -> Any:
        return self.get(name)

    def get(self, item: str, default_var: Any = _NO_DEFAULT) -> Any:
        """Airflow's `var.value.get('name', 'default')`: the default when the variable is not set."""
        from ledger.sdk.secrets import Variable

        try:
            return Variable.get(item, deserialize_json=self._json)
        except LookupError as exc:
            if default_var is not _NO_DEFAULT:
                return default_var
            raise TemplateError(str(exc).strip('"')) from None


class _Vars:
    value = _Variables()
    json = _Variables(as_json=True)


class _Connections:
    """`conn.ID.host` ...: the connection as Airflow's providers find it (find_connection): LEDGER_CONN_<ID>, the
    ledger, then AIRFLOW_CONN_<ID>."""

    def __getattr__(self, name: str) -> Any:
        from ledger.core.errors import InvalidInput
        from ledger.sdk.secrets import find_connection

        try:
            return find_connection(name)
        except (LookupError, InvalidInput) as exc:  # (InvalidInput: a value that is neither a URI nor JSON)
            raise TemplateError(str(exc).strip('"')) from None


# the names a Python callable may ask for by parameter (`def f(ti, ds)`), as Airflow passes its context
CONTEXT_NAMES = (
    "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz", "logical_date", "execution_date", "data_interval_start",
    "data_interval_end", "prev_data_interval_start", "prev_data_interval_end", "prev_data_interval_start_success",
    "prev_data_interval_end_success", "prev_start_date_success", "prev_end_date_success", "next_ds",
    "next_ds_nodash", "prev_ds", "prev_ds_nodash", "yesterday_ds", "yesterday_ds_nodash", "tomorrow_ds",
    "tomorrow_ds_nodash", "next_execution_date", "prev_execution_date", "run_id", "run_type", "try_number",
    "dag_version", "dag", "task", "ti", "task_instance", "task_instance_key_str", "params", "conf", "dag_run",
    "templates_dict", "var", "conn", "macros", "test_mode", "exception", "inlets", "outlets",
    "triggering_dataset_events", "triggering_asset_events", "inlet_events", "outlet_events", "expanded_ti_count",
    "map_index_template")


def _dataset_names(task: Any, ti: Any) -> dict[str, Any]:
    """The task's inlets and outlets, and what the try (`ti`: its TaskContext) has of their events."""
    from ledger.sdk.datasets import TriggeringEvents

    triggering = TriggeringEvents(getattr(ti, "triggering_dataset_events", None) or {})
    return {"inlets": list(getattr(task, "inlets", None) or []), "outlets": list(getattr(task, "outlets", None) or []),
            "triggering_dataset_events": triggering, "triggering_asset_events": triggering,
            "inlet_events": getattr(ti, "inlet_events", None), "outlet_events": getattr(ti, "outlet_events", None)}


def template_names(*, logical_date: dt.datetime, data_interval_start: dt.datetime, data_interval_end: dt.datetime,
                   prev_interval: tuple[str, str] | None, run_id: str, run_type: str, try_number: int,
                   dag_version: str, dag: Any, task: Any, params: Mapping[str, Any],
                   conf: Mapping[str, Any], ti: Any = None,
                   prev_success: Sequence[str | None] | None = None, run_started: str | None = None,
                   run_ended: str | None = None, run_state: str = "running") -> dict[str, Any]:
    """The names templates and Airflow's context give. `run_started`, `run_ended`: the run's start and end (ISO;
    None: not known, or not yet), `run_state`: its state (a try runs in a running run), for `dag_run`."""
    when = pendulum.instance(logical_date).in_timezone("UTC")
    start, end = pendulum.instance(data_interval_start), pendulum.instance(data_interval_end)
    dag_id = str(getattr(dag, "dag_id", ""))
    task_id = str(getattr(task, "task_id", ""))
    user_macros = dict(getattr(dag, "user_defined_macros", None) or {})
    return {
        **user_macros,
        "ts_nodash_with_tz": when.format("YYYYMMDDTHHmmssZZ"),
        "task_instance_key_str": f"{dag_id}__{task_id}__{when.format('YYYYMMDD')}",
        "execution_date": when, "next_execution_date": end, "prev_execution_date": None,
        "next_ds": end.format("YYYY-MM-DD"), "next_ds_nodash": end.format("YYYYMMDD"),
        "prev_ds": None, "prev_ds_nodash": None,
        "yesterday_ds": when.subtract(days=1).format("YYYY-MM-DD"),
        "yesterday_ds_nodash": when.subtract(days=1).format("YYYYMMDD"),
        "tomorrow_ds": when.add(days=1).format("YYYY-MM-DD"), "tomorrow_ds_nodash": when.add(days=1).format("YYYYMMDD"),
        **prior_success_names(prev_success),
        "test_mode": run_type == "test", "exception": None, **_dataset_names(task, ti), "expanded_ti_count": None,
        "map_index_template": None,
        "dag_run": SimpleNamespace(conf=dict(conf), run_id=run_id, run_type=run_type, logical_date=when,
                                   execution_date=when, data_interval_start=start, data_interval_end=end,
                                   dag_id=dag_id, external_trigger=run_type == "manual",
                                   id=int(run_id) if run_id.isdigit() and int(run_id) else None, state=run_state,
                                   start_date=pendulum.parse(run_started) if run_started else None,
                                   end_date=pendulum.parse(run_ended) if run_ended else None),
        "macros": _UserMacros(user_macros) if user_macros else _Macros(),
    } | {
        "ds": when.format("YYYY-MM-DD"), "ds_nodash": when.format("YYYYMMDD"), "ts": when.isoformat(),
        "ts_nodash": when.format("YYYYMMDDTHHmmss"), "logical_date": when,
        "data_interval_start": pendulum.instance(data_interval_start),
        "data_interval_end": pendulum.instance(data_interval_end),
        "prev_data_interval_start": pendulum.parse(prev_interval[0]) if prev_interval else None,
        "prev_data_interval_end": pendulum.parse(prev_interval[1]) if prev_interval else None,
        "run_id": run_id, "run_type": run_type, "try_number": try_number, "dag_version": dag_version,
        "dag": dag, "task": task, "params": dict(params), "conf": dict(conf),
        "var": _Vars(), "conn": _Connections(), "ti": ti, "task_instance": ti,
    }


PRIOR_SUCCESS_NAMES = ("prev_data_interval_start_success", "prev_data_interval_end_success", "prev_start_date_success",
                       "prev_end_date_success")


def prior_success_names(prior: Sequence[str | None] | None) -> dict[str, pendulum.DateTime | None]:
    """Airflow's `prev_*_success` names from the prior successful run's data interval start and end, start and end
    times (ISO; a time it lacks, or no such run: None)."""
    values = list(prior) if prior is not None else [None] * len(PRIOR_SUCCESS_NAMES)
    return {name: pendulum.parse(value) if value else None  # type: ignore[misc]
            for name, value in zip(PRIOR_SUCCESS_NAMES, values, strict=True)}


# Airflow's: `{% do list.append(x) %}` (a DAG's jinja_environment_kwargs may replace it)
EXTENSIONS = ("jinja2.ext.do",)


@cache
def _default_environment() -> jinja2.Environment:
    """ledger's Jinja environment, made on the first template rendered: jinja2 is imported only then. A process
    that forks tries (a LocalExecutor worker) holds no jinja2 until a task it plans has a template (`preload`): its
    forks of tries that render nothing share about 1.6 MB less with them (decision 0342)."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
                             extensions=list(EXTENSIONS))
    env.filters.update({
        "ds": lambda d: pendulum.instance(d).format("YYYY-MM-DD"),
        "ds_nodash": lambda d: pendulum.instance(d).format("YYYYMMDD"),
        "ts": lambda d: pendulum.instance(d).isoformat(),
        "ts_nodash": lambda d: pendulum.instance(d).format("YYYYMMDDTHHmmss"),
        "ts_nodash_with_tz": lambda d: pendulum.instance(d).format("YYYYMMDDTHHmmssZZ"),
    })
    return env


def preload(task: Any) -> None:
    """Before forking a try of `task`: make the Jinja environment here, and import what a DAG's own settings make
    its templates need, if the try will render (a template in one of its template fields or in the literal lists it
    is expanded over, or Jinja settings of its DAG's, which `render` applies to every value), so that the try's
    process inherits them rather than importing jinja2 itself. A template that appears only as the try runs (a
    value passed on by another task, one a callable renders by itself) is still rendered: its process imports
    jinja2 then."""
    dag = getattr(task, "dag", None)
    fields = (getattr(task, name, None) for name in getattr(task, "template_fields", ()))
    if _has_settings(dag) or any(has_template(value) for value in fields) \
            or any(has_template(source) for _arg, source in getattr(task, "expand_args", ())):
        _default_environment()
        if getattr(dag, "render_template_as_native_obj", False):
            import jinja2.nativetypes  # noqa: F401  (its NativeEnvironment, which environment() makes per render)


def _has_settings(dag: Any) -> bool:
    """Whether a DAG has Jinja settings of its own (user_defined_filters, render_template_as_native_obj,
    jinja_environment_kwargs or template_undefined): its environment is made for every value rendered, which holds
    a template or not, so that a setting Jinja refuses fails the try whatever the value."""
    return bool(getattr(dag, "user_defined_filters", None) or getattr(dag, "render_template_as_native_obj", False)
                or getattr(dag, "jinja_options", None))


def has_template(value: Any) -> bool:
    """Whether `value` (a string, or lists and dicts of them) holds any Jinja syntax to render."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, (list, tuple)):
        return any(has_template(v) for v in value)
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    return isinstance(value, LiteralValue)  # given as it is, when the try runs


def environment(filters: Mapping[str, Any] | None, native: bool = False,
                options: Mapping[str, Any] | None = None, folders: Sequence[str] | None = None) -> jinja2.Environment:
    """The Jinja environment templates render in: with a DAG's user_defined_filters over the built-in ones (a
    filter of the DAG's named as one of Jinja's, `first`, is the DAG's, as in Airflow); `native`: a DAG's
    render_template_as_native_obj, a template gives a Python value (`{{ [1, 2] }}` a list), as Airflow's;
    `options`: a DAG's jinja_environment_kwargs (and template_undefined as `undefined`), over ledger's; `folders`:
    where `{% include %}`, `{% import %}` and `{% extends %}` find the files they name (template_folders; None: no
    loader, as for a template that names no file)."""
    if not filters and not native and not options and folders is None:
        return _default_environment()
    import jinja2

    settings = {"undefined": jinja2.StrictUndefined, "autoescape": False, "keep_trailing_newline": True,
                "extensions": list(EXTENSIONS), **({"loader": jinja2.FileSystemLoader(list(folders))}
                                                   if folders is not None else {}), **(options or {})}
    if native:
        import jinja2.nativetypes

        env: jinja2.Environment = jinja2.nativetypes.NativeEnvironment(**settings)
    else:
        env = jinja2.Environment(**settings)
    env.filters = {**_default_environment().filters, **(filters or {})}
    return env


def render(value: Any, names: Mapping[str, Any], *, field: str, filters: Mapping[str, Any] | None = None) -> Any:
    """`value` with every string in it rendered; TemplateError names the field and what went wrong. The filters
    are the DAG's user_defined_filters (default: those of `names["dag"]`), and its render_template_as_native_obj
    says whether a template gives a Python value."""
    dag = names.get("dag")
    if filters is None:
        filters = getattr(dag, "user_defined_filters", None)
    native = bool(getattr(dag, "render_template_as_native_obj", False))
    options = getattr(dag, "jinja_options", None)
    if not filters and not native and not options and not has_template(value):
        return _render(value, names, field, None)  # (ledger's environment: nothing to render, jinja2 not imported)
    folders = template_folders(dag) if names_files(value) else None
    return _render(value, names, field, environment(filters, native, options, folders))


# a tag that reads another template file: {% include "x.sql" %}, {% import "m.j2" as m %}, {% from ... %},
# {% extends ... %}
_FILE_TAG = re.compile(r"{%[-+]?\s*(?:include|import|from|extends)\b")


def names_files(value: Any) -> bool:
    """Whether `value` (a string, or lists and dicts of them) has a tag that reads another template file."""
    return any("{%" in text and _FILE_TAG.search(text) is not None for text in _strings(value))


def template_folders(dag: Any, fileloc: str | None = None) -> list[str]:
    """Where a DAG's templates find the files they include, as Airflow's DAG.get_template_env looks: the DAG file's
    folder (in a try, the folder of its version's stored code; `fileloc`: the DAG file's path, when the DAG does not
    know it yet), then the DAG's template_searchpath."""
    fileloc = fileloc or getattr(dag, "fileloc", None)
    return [*([os.path.dirname(fileloc)] if fileloc else []), *getattr(dag, "template_searchpath", ())]


def included_files(dag: Any, fileloc: str | None = None) -> list[str]:
    """The files that the templates of `dag`'s tasks include, import or extend (and those they include in turn),
    found as a try's render finds them (template_folders): the DAG's code, which a version keeps with the DAG file
    when they are in the DAGs folder. A name given by an expression, or a file found nowhere, is left to the try
    (whose render fails, naming it)."""
    texts = [text for task in getattr(dag, "tasks", {}).values()
             for value in [*(getattr(task, name, None) for name in getattr(task, "template_fields", ())),
                           *(source for _arg, source in getattr(task, "expand_args", ()))]  # (a mapped task's lists)
             for text in _strings(value) if names_files(text)]
    if not texts:
        return []
    import jinja2
    import jinja2.meta

    # (with the DAG's own Jinja settings: a template may need an extension it enables to parse)
    env = environment(None, options=getattr(dag, "jinja_options", None), folders=template_folders(dag, fileloc))
    found: list[str] = []
    while texts:
        try:
            names = jinja2.meta.find_referenced_templates(env.parse(texts.pop()))
        except jinja2.TemplateSyntaxError:
            continue  # (the try's render says what is wrong)
        for name in names:
            if name is None:
                continue
            try:
                source, path, _uptodate = env.loader.get_source(env, name)  # type: ignore[union-attr]
            except (jinja2.TemplateNotFound, OSError, UnicodeDecodeError):  # (the try's render says what is wrong)
                continue
            if path is not None and path not in found:
                found.append(path)
                texts.append(source)
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


class LiteralValue:
    """Airflow's `literal(value)`: a value of a templated field that is given as it is, not rendered."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:  # how it reads in a version's structure
        return f"literal({self.value!r})"


def literal(value: Any) -> LiteralValue:
    return LiteralValue(value)


def _render(value: Any, names: Mapping[str, Any], field: str, env: jinja2.Environment | None) -> Any:
    if isinstance(value, LiteralValue):
        return value.value
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        assert env is not None  # (render() makes one for a value with a template in it)
        import jinja2

        try:
            return env.from_string(value).render(**names)
        except TemplateError as exc:
            raise TemplateError(f"template error in {field}: {exc}") from None
        except jinja2.TemplateNotFound as exc:  # (and TemplatesNotFound: none of a list of names)
            folders = getattr(env.loader, "searchpath", None)
            where = f"looked in {', '.join(folders)}" if folders else "no folder to look in"
            files = getattr(exc, "templates", None) or [exc.name]
            which = f"the template file {files[0]!r} is" if len(files) == 1 else \
                f"none of the template files {', '.join(repr(f) for f in files)} is"
            raise TemplateError(f"template error in {field}: {which} not found ({where})") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template error in {field}: {exc.message or type(exc).__name__}") from None
    if isinstance(value, list):
        return [_render(v, names, field, env) for v in value]
    if isinstance(value, tuple):
        return tuple(_render(v, names, field, env) for v in value)
    if isinstance(value, dict):
        return {k: _render(v, names, field, env) for k, v in value.items()}
    return value
