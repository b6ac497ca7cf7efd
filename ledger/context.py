"""What a running task knows about itself: the facts of its run, as an object and as env variables."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _iso(value: datetime) -> str:
    return value.isoformat()


@dataclass(frozen=True)
class TaskContext:
    dag_id: str
    task_id: str
    run_id: str
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    try_number: int
    dag_version: str
    run_type: str
    conf: dict[str, Any] = field(default_factory=dict)
    log_path: str | None = None

    def env(self) -> dict[str, str]:
        """The LEDGER_* environment variables a BashTask sees (dates ISO-8601 in UTC)."""
        return {
            "LEDGER_DAG_ID": self.dag_id,
            "LEDGER_TASK_ID": self.task_id,
            "LEDGER_RUN_ID": self.run_id,
            "LEDGER_LOGICAL_DATE": _iso(self.logical_date),
            "LEDGER_DATA_INTERVAL_START": _iso(self.data_interval_start),
            "LEDGER_DATA_INTERVAL_END": _iso(self.data_interval_end),
            "LEDGER_TRY_NUMBER": str(self.try_number),
            "LEDGER_DAG_VERSION": self.dag_version,
            "LEDGER_RUN_TYPE": self.run_type,
        }
