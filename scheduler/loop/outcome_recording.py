"""Recording what executors reported of tries: the facts read, the pure rule's decisions, the guarded writes.

ledger/core/outcomes.py decides what each report makes of its task instance; ledger/store/tasks.py reads what the
rule needs (current_tries) and writes what it decided (write_outcomes). This module puts the three together for
the job (scheduler/loop/job.py) and for anything else that records outcomes in a transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from ledger.core.outcomes import Outcome, decide_all
from ledger.core.states import TaskState
from ledger.store import tasks as task_store


def record_outcomes(session: Session, outcomes: list[Outcome], known: Mapping[int, tuple[int, int, str]] | None = None,
                    *, max_lost_tries: int = 3, now: datetime | None = None) -> list[tuple[Outcome, TaskState]]:
    """Record `outcomes` in `session`; the states written, in order (an outcome of a try that is no longer the
    current one is left out). `known`: ti id -> (try number, max tries, state) as the caller knows the database
    holds them (see task_store.current_tries). StaleState when another process changed a row meanwhile."""
    if not outcomes:
        return []
    current = task_store.current_tries(session, outcomes, known)
    decided = decide_all(outcomes, current, max_lost_tries=max_lost_tries, now=now)
    task_store.write_outcomes(session, decided)
    return [(d.outcome, d.state) for d in decided]
