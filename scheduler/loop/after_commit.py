"""What a job's transaction decided that happens outside the database, once the transaction has committed.

File writes stay out of transactions, and a transaction that a fault rolls back must leave nothing behind that
the database does not hold: a try's log says why the try stopped only once its outcome is recorded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path


def tell_log(path: str, at: datetime, text: str) -> None:
    """Append a line to a try's log once the try has ended (its process is gone): why it was stopped. A try
    stopped before it started gets a log of this one line."""
    with contextlib.suppress(OSError):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError), open(path, "a") as log:
        log.write(f"[ledger] {at.astimezone(UTC).isoformat(timespec='milliseconds')} {text}\n")


@dataclass
class AfterCommit:
    log_notes: list[tuple[str, datetime, str]] = field(default_factory=list)  # (log, at, line) to append

    def note(self, log_path: str, at: datetime, text: str) -> None:
        self.log_notes.append((log_path, at, text))

    def carry_out(self) -> None:
        """After the commit: write the notes."""
        notes, self.log_notes = self.log_notes, []
        for path, at, text in notes:
            tell_log(path, at, text)
