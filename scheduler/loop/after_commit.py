"""Lines a job's transaction decided to append to tries' logs, written once the transaction has committed
(scheduler/loop/effects.py).

File writes stay out of transactions, and a transaction that a fault rolls back must leave nothing behind that
the database does not hold: a try's log says why the try stopped only once its outcome is recorded.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path


def tell_log(path: str, at: datetime, text: str) -> None:
    """Append a line to a try's log once the try has ended (its process is gone): why it was stopped. A try
    stopped before it started gets a log of this one line."""
    with contextlib.suppress(OSError):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError), open(path, "a") as log:
        log.write(f"[ledger] {at.astimezone(UTC).isoformat(timespec='milliseconds')} {text}\n")
