"""How a try ends: its state, the exit codes a forked child uses to say it, and one-line reasons."""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from typing import Literal

State = Literal["success", "failed", "skipped", "up_for_reschedule"]

EXIT_SUCCESS = 0
EXIT_FAILED = 1
EXIT_SKIPPED = 99  # also what a BashTask exits with to say "skipped" (the Airflow convention)
BASH_SKIP_EXIT_CODE = 99
EXIT_RESCHEDULE = 98  # a sensor asked to be checked again later (ledger/sdk/sensors.py)
EXIT_CODES: dict[State, int] = {"success": EXIT_SUCCESS, "failed": EXIT_FAILED, "skipped": EXIT_SKIPPED,
                                "up_for_reschedule": EXIT_RESCHEDULE}
# the reason of a failed try that spends no retry (FailWithoutRetry: a sensor's timeout, AirflowFailException)
NO_RETRY_PREFIX = "no retry: "
# the reason of a failed try whose retry waits a delay of its own (Airflow's retry policy): "retry in 30 s: ..."
RETRY_IN = re.compile(r"retry in (\d+(?:\.\d+)?) s: ")


def retry_delay(reason: str | None, default: float) -> float:
    """The delay before the retry of a failed try: the one its reason names (RETRY_IN), else `default`."""
    found = RETRY_IN.match(reason or "")
    return float(found.group(1)) if found else default

REASON_LIMIT = 300


def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    """Collapse whitespace to one line and cut it to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    message = str(exc)
    return one_line(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def describe_status(status: int) -> str:
    """'exit code N' or 'killed by signal SIGNAME' for a waitpid status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"killed by signal {name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


@dataclass
class Outcome:
    """How a try ended, as its executor saw it."""

    state: State
    reason: str | None
    at: float  # time.time() when the end was seen
