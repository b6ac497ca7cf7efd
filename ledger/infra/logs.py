"""Where a try's log lives: $LEDGER_HOME/logs/<dag>/run_<run>/<task>[/map_<i>]/try_<n>.log. The scheduler
writes there; `ledger tasks logs`, `ledger dags test --record` and the web view read it."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.core.mapping import NOT_MAPPED


def log_path(logs: Path, dag_id: str, run_id: int, task_id: str, try_number: int, map_index: int = NOT_MAPPED) -> Path:
    """Where a try's log goes: $LEDGER_HOME/logs/<dag>/run_<run>/<task>[/map_<i>]/try_<n>.log."""
    return Path(log_file(str(logs), dag_id, run_id, task_id, try_number, map_index))


def log_file(logs: str, dag_id: str, run_id: int, task_id: str, try_number: int, map_index: int = NOT_MAPPED) -> str:
    """log_path as text (the scheduler builds one per try: without pathlib's parsing)."""
    if map_index < 0:
        return os.path.join(logs, dag_id, f"run_{run_id}", task_id, f"try_{try_number}.log")
    return os.path.join(logs, dag_id, f"run_{run_id}", task_id, f"map_{map_index}", f"try_{try_number}.log")
