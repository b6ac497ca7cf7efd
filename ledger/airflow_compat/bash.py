"""Airflow's rules for a Bash command's end and environment, shared by BashOperator (ledger/airflow_compat/
operators.py) and `@task.bash` (decorators.py):

* `skip_on_exit_code` (99 unless given): an exit code, a list of them, or None (the command never skips). An exit
  code among them skips the task; another non-zero one fails it, as in Airflow 2.
* `env` and `append_env` (False unless given): without `env` the command runs in the try's environment; with
  `env`, in `env` alone, unless `append_env=True` puts `env` over the try's environment. ledger's variables of
  the try (LEDGER_DAG_ID, ...: ledger/sdk/context.py) are set either way, as Airflow sets its AIRFLOW_CTX_*.

The task runner (ledger/scheduler/runtime/task_runner.py) reads a task's `skip_exit_codes` and `inherit_env`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger.core.errors import DagDefinitionError

AIRFLOW_SKIP_EXIT_CODE = 99  # Airflow's default skip_on_exit_code


def skip_exit_codes(task_id: str | None, value: Any) -> tuple[int, ...]:
    """The exit codes `skip_on_exit_code` names: one code, several (a list, tuple or set), or none (None).
    DagDefinitionError for anything else."""
    if value is None:
        return ()
    codes = [value] if isinstance(value, int) else list(value) if isinstance(value, Iterable) and not isinstance(
        value, (str, bytes, dict)) else None
    if codes is None or not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
        raise DagDefinitionError(f"task {task_id!r}: skip_on_exit_code must be an exit code, a list of them or "
                                 f"None, not {value!r:.60}")
    return tuple(codes)


def inherits_environment(env: Any, append_env: bool) -> bool:
    """Whether the command runs in the try's environment (with `env` over it): when no `env` is given, or with
    `append_env=True`, as Airflow's BashOperator.get_env decides."""
    return env is None or bool(append_env)
