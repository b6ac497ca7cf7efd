"""What a transaction does as it commits, in one fixed order: link the events it wrote into their chains
(ledger/store/chain.py, step 1), then add the dataset rows it wrote to their tallies (ledger/store/dataset_tally.py,
step 2). Both lock rows (chain heads, then tallies, each kind in the order of its keys), so that on PostgreSQL two
transactions never wait for each other in a circle. Each module registers its step when imported; a session's
commit runs them (`before_commit`), and the scheduler's kept SQLite connection, whose session does not commit,
calls `finish` itself (scheduler/loop/job_connection.py)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

Step = Callable[[Session], None]

_STEPS: dict[int, tuple[Step, Step]] = {}  # order -> (run before commit, forget when the transaction ends)


def step(order: int, run: Step, forget: Step) -> None:
    """Run `run` as each transaction commits, after the steps of lower order; `forget` when it has ended."""
    _STEPS[order] = (run, forget)


def finish(session: Session) -> None:
    for order in sorted(_STEPS):
        _STEPS[order][0](session)


@event.listens_for(Session, "before_commit")
def _before_commit(session: Session) -> None:
    finish(session)


@event.listens_for(Session, "after_transaction_end")
def _after_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # the outermost transaction ended (committed or not): nothing is left to do
        for _run, forget in _STEPS.values():
            forget(session)
