"""Jinja templates in task fields, with Airflow's names: `{{ ds }}`, `{{ params.n }}`, `{{ macros.ds_add(ds, 1) }}`.

A task class lists its templated fields in `template_fields` (BashTask: bash_command, env; PythonTask:
op_args, op_kwargs, templates_dict). Strings are rendered, lists and dicts recursively; an undefined name
is an error (StrictUndefined), never an empty string. What was rendered is stored with the try.

Names: ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start, data_interval_end,
prev_data_interval_start, prev_data_interval_end (of the previous run in the chain; None for the first),
run_id, run_type, try_number, dag_version, dag, task, ti (ti.xcom_pull(task_ids=...)), params, conf,
var (var.value.NAME, var.json.NAME:
LEDGER_VAR_<NAME> or `ledger variables`), conn (conn.NAME.host ...: LEDGER_CONN_<NAME> or
`ledger connections`), macros.ds_add, macros.ds_format,
macros.datetime, macros.timedelta.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import jinja2
import pendulum


class TemplateError(ValueError):
    pass


def ds_add(ds: str, days: int) -> str:
    """`ds` (YYYY-MM-DD) plus `days` (negative: minus)."""
    return (dt.date.fromisoformat(ds) + dt.timedelta(days=days)).isoformat()


def ds_format(ds: str, input_format: str, output_format: str) -> str:
    return dt.datetime.strptime(ds, input_format).strftime(output_format)


class _Macros:
    ds_add = staticmethod(ds_add)
    ds_format = staticmethod(ds_format)
    datetime = dt.datetime
    timedelta = dt.timedelta


class _Variables:
    """`var.value.NAME` (text) and `var.json.NAME` (parsed): LEDGER_VAR_<NAME>, then the database."""

    def __init__(self, as_json: bool = False) -> None:
        self._json = as_json

    def __getattr__(self, name: str) -> Any:
        from ledger.secrets import Variable

        try:
            return Variable.get(name, deserialize_json=self._json)
        except LookupError as exc:
            raise TemplateError(str(exc).strip('"')) from None


class _Vars:
    value = _Variables()
    json = _Variables(as_json=True)


class _Connections:
    def __getattr__(self, name: str) -> Any:
        from ledger.secrets import get_connection

        try:
            return get_connection(name)
        except LookupError as exc:
            raise TemplateError(str(exc).strip('"')) from None


def template_names(*, logical_date: dt.datetime, data_interval_start: dt.datetime, data_interval_end: dt.datetime,
                   prev_interval: tuple[str, str] | None, run_id: str, run_type: str, try_number: int,
                   dag_version: str, dag: Any, task: Any, params: Mapping[str, Any],
                   conf: Mapping[str, Any], ti: Any = None) -> dict[str, Any]:
    when = pendulum.instance(logical_date).in_timezone("UTC")
    return {
        "ds": when.format("YYYY-MM-DD"), "ds_nodash": when.format("YYYYMMDD"), "ts": when.isoformat(),
        "ts_nodash": when.format("YYYYMMDDTHHmmss"), "logical_date": when,
        "data_interval_start": pendulum.instance(data_interval_start),
        "data_interval_end": pendulum.instance(data_interval_end),
        "prev_data_interval_start": pendulum.parse(prev_interval[0]) if prev_interval else None,
        "prev_data_interval_end": pendulum.parse(prev_interval[1]) if prev_interval else None,
        "run_id": run_id, "run_type": run_type, "try_number": try_number, "dag_version": dag_version,
        "dag": dag, "task": task, "params": dict(params), "conf": dict(conf),
        "dag_run": SimpleNamespace(conf=dict(conf), run_id=run_id, run_type=run_type, logical_date=when),
        "var": _Vars(), "conn": _Connections(), "macros": _Macros(), "ti": ti, "task_instance": ti,
    }


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


def has_template(value: Any) -> bool:
    """Whether `value` (a string, or lists and dicts of them) holds any Jinja syntax to render."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, (list, tuple)):
        return any(has_template(v) for v in value)
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    return False


def render(value: Any, names: Mapping[str, Any], *, field: str) -> Any:
    """`value` with every string in it rendered; TemplateError names the field and what went wrong."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        try:
            return _ENV.from_string(value).render(**names)
        except TemplateError as exc:
            raise TemplateError(f"template error in {field}: {exc}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template error in {field}: {exc.message or type(exc).__name__}") from None
    if isinstance(value, list):
        return [render(v, names, field=field) for v in value]
    if isinstance(value, tuple):
        return tuple(render(v, names, field=field) for v in value)
    if isinstance(value, dict):
        return {k: render(v, names, field=field) for k, v in value.items()}
    return value
