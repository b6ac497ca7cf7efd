"""scheduler/loop/adoption.py on a real SQLite database: an executor's remarks become events naming the task's DAG and
run; an executor that adopts nothing leaves every orphan to be recorded lost."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.scheduler.loop import adoption
from ledger.store import events as event_store
from tests.scheduler.fakes import FakeExecutor

NOW = datetime(2024, 3, 1, tzinfo=UTC)


class Remarking(FakeExecutor):
    def __init__(self, remarks: list[dict[str, Any]]) -> None:
        super().__init__(1)
        self.pending = remarks

    def remarks(self) -> list[dict[str, Any]]:
        out, self.pending = self.pending, []
        return out


def test_a_refused_redelivery_is_recorded_as_an_event_once(session: Session) -> None:
    executor = Remarking([{"kind": "try_redelivery_refused", "ti_id": 999, "try_number": 1, "host": "w2",
                           "reason": "a redelivered message for try 1 was refused by worker w2: w1 had started it"}])
    adoption.record_remarks(session, executor, actor="scheduler:1@test", now=NOW)
    adoption.record_remarks(session, executor, actor="scheduler:1@test", now=NOW)  # nothing new: nothing written
    rows = event_store.listing(session, kinds=["try_redelivery_refused"])
    assert len(rows) == 1
    assert rows[0].details["host"] == "w2" and "w1 had started it" in rows[0].details["reason"]


def test_an_executor_whose_tries_die_with_their_job_adopts_none(session: Session) -> None:
    orphans = [(1, 1, 1), (2, 3, 1)]
    left, adopted = adoption.adopt(session, FakeExecutor(1), orphans, job_id=7, logs="/tmp/logs",
                                   actor="scheduler:7@test", now=NOW)
    assert left == orphans and adopted == {}
