"""Task state changes as signals: `ledger.task.<dag>.<task>` with the state as value.

Other processes (and signal-driven tasks) hear of a task's new state at once. A job collects them during a
transaction and sends them in one batch at its end: sending takes locks until commit, and reading signals after
sending in one transaction could wait on another job doing the same. Once the transaction has committed, the
doorbells of the processes waiting for signals are rung.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.signals import is_valid_key
from ledger.store import signals as signal_store


@dataclass
class TaskStateSignals:
    enabled: bool = True  # LEDGER_TASK_STATE_SIGNALS
    items: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    sent: bool = False  # a committed transaction sent signals: ring the doorbells

    def add(self, dag_id: str, task_id: str, state: str, meta: dict[str, Any]) -> None:
        key = f"ledger.task.{dag_id}.{task_id}"
        # a key outside the signal key set (a long or non-ASCII name) is left out, not an error
        if self.enabled and is_valid_key(key):
            self.items.append((key, state, {"dag_id": dag_id, "task_id": task_id, **meta}))

    def flush(self, session: Session, now: datetime, sender: str) -> None:
        """Send what was collected, at the end of the transaction."""
        if self.items:
            items, self.items = self.items, []
            signal_store.send_unreturned(session, items, sender=sender, now=now)
            self.sent = True

    def to_ring(self) -> bool:
        """After the commit: whether doorbells are to be rung (once)."""
        sent, self.sent = self.sent, False
        return sent
