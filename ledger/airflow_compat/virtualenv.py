"""Airflow's PythonVirtualenvOperator and ExternalPythonOperator: ledger's tasks of ledger/sdk/python_envs.py with
Airflow's operator arguments (as PythonOperator has them: ledger/airflow_compat/operators.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ledger.airflow_compat.operators import PythonOperator, _make
from ledger.core.errors import DagDefinitionError
from ledger.core.flow import BRANCH
from ledger.sdk.python_envs import ExternalPythonTask, PythonVirtualenvTask

ENV_ARGUMENTS = ("serializer", "use_dill", "skip_on_exit_code", "env_vars", "inherit_env", "expect_airflow",
                 "string_args", "templates_exts")


def _own(task_id: str | None, python_callable: Callable[..., Any] | None, op_args: Sequence[Any] | None,
         op_kwargs: dict[str, Any] | None, templates_dict: dict[str, Any] | None, kwargs: dict[str, Any],
         names: Sequence[str]) -> dict[str, Any]:
    """The arguments of ledger's task class, taken out of `kwargs` (what is left are Airflow's common ones)."""
    if python_callable is None:
        raise DagDefinitionError(f"task {task_id!r}: a python_callable is needed")
    own = {"python_callable": python_callable, "op_args": op_args or (), "op_kwargs": op_kwargs,
           "templates_dict": templates_dict}
    own.update({name: kwargs.pop(name) for name in (*ENV_ARGUMENTS, *names) if name in kwargs})
    kwargs.pop("show_return_value_in_logs", None)
    return own


class PythonVirtualenvOperator(PythonOperator, PythonVirtualenvTask):
    def __init__(self, *, task_id: str | None = None, python_callable: Callable[..., Any] | None = None,
                 op_args: Sequence[Any] | None = None, op_kwargs: dict[str, Any] | None = None,
                 templates_dict: dict[str, Any] | None = None, **kwargs: Any) -> None:
        own = _own(task_id, python_callable, op_args, op_kwargs, templates_dict, kwargs,
                   ("requirements", "python_version", "system_site_packages", "pip_install_options", "index_urls",
                    "venv_cache_path"))
        _make(self, PythonVirtualenvTask, task_id, kwargs, own)


class ExternalPythonOperator(PythonOperator, ExternalPythonTask):
    def __init__(self, *, task_id: str | None = None, python: str | None = None,
                 python_callable: Callable[..., Any] | None = None, op_args: Sequence[Any] | None = None,
                 op_kwargs: dict[str, Any] | None = None, templates_dict: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        own = _own(task_id, python_callable, op_args, op_kwargs, templates_dict, kwargs, ())
        _make(self, ExternalPythonTask, task_id, kwargs, {**own, "python": python})


class BranchPythonVirtualenvOperator(PythonVirtualenvOperator):
    """Airflow's BranchPythonVirtualenvOperator: the callable runs in its virtualenv and returns the task id(s) to
    follow, as a BranchPythonOperator's."""

    flow = BRANCH


class BranchExternalPythonOperator(ExternalPythonOperator):
    """Airflow's BranchExternalPythonOperator: the callable runs in the interpreter at `python` and returns the
    task id(s) to follow, as a BranchPythonOperator's."""

    flow = BRANCH
