"""What a job's transaction decided that happens outside the database, once the transaction has committed.

File writes stay out of transactions, and a transaction that a fault rolls back must leave nothing behind that
the database does not hold: a try's log says why the try stopped only once its outcome is recorded, and the side
files a try left beside its log (values it passed, templates it rendered, what it wrote) are removed only once
what they held is in the database.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from scheduler.runtime import try_files


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
    recorded: list[str] = field(default_factory=list)  # logs whose side files were recorded: removed

    def note(self, log_path: str, at: datetime, text: str) -> None:
        self.log_notes.append((log_path, at, text))

    def side_files_recorded(self, log_path: str) -> None:
        self.recorded.append(log_path)

    def carry_out(self) -> None:
        """After the commit: write the notes, remove the recorded side files."""
        notes, self.log_notes = self.log_notes, []
        for path, at, text in notes:
            tell_log(path, at, text)
        recorded, self.recorded = self.recorded, []
        for path in recorded:  # what they held is in the database now (values that may hold secrets among it)
            try_files.remove(path)
