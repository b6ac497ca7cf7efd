"""TestRunJob: the DagRunJob of `ledger dags test --record`, which executes the one run it created, in the
foreground (a SequentialExecutor), recording its task instances, tries, logs and events like any run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.scheduler.loop.job import DagRunJob


@dataclass
class TestRunJob(DagRunJob):
    run_id: int = 0
    job_type: str = "TestRunJob"

    def claim_filter(self) -> dict[str, Any]:
        return {"run_ids": [self.run_id]}
