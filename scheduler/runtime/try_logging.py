"""A try's output streams and its Python logging: the streams on fd 1 and 2 a try writes through, and the handler
that sends the logging of its code (the root logger and named ones, INFO and above) to its log as Airflow's task log
lines, with the secrets it read masked.

Both are made once per process that forks tries, before it forks. A LocalExecutor worker also installs the handler
before each fork (`try_plan.settle`: its child finds it in place, decision 0324); the handler is set aside while the
worker imports a DAG file (`set_aside`), whose logging is the worker's own.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator
from typing import Any

from ledger.sdk import secrets

_streams: tuple[io.TextIOWrapper, io.TextIOWrapper] | None = None


def output_streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """Line-buffered text streams on fd 1 and 2 for tries, made once per forking process and never written
    to by it (so they hold nothing when a child inherits them)."""
    global _streams
    if _streams is None:
        _streams = tuple(  # type: ignore[assignment]
            open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
            for fd in (1, 2))
    assert _streams is not None
    return _streams


class _MaskSecrets(logging.Filter):
    """Secrets the try has read (ledger/sdk/secrets.py) are *** in the log records its code emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        if secrets.secrets_seen():
            record.msg = secrets.mask(record.getMessage())
            record.args = None
        return True


_log_handler: logging.Handler | None = None  # the handler a try's logging goes through now
_made: logging.StreamHandler[Any] | None = None  # the last one made, kept for the next try on the same stream


def log_handler(stream: Any) -> logging.StreamHandler[Any]:
    """The handler that writes a try's logging to `stream`: made once per stream (a worker makes the one on
    output_streams()'s stderr before it forks, and each try installs it)."""
    global _made
    if _made is None or _made.stream is not stream:
        _made = logging.StreamHandler(stream)
        _made.setFormatter(logging.Formatter("[%(asctime)s] {%(name)s} %(levelname)s - %(message)s"))
        _made.addFilter(_MaskSecrets())
    return _made


def capture_logging(stream: Any = None) -> None:
    """Python `logging` from the try's code goes to `stream` (default: sys.stderr, the try's log once its output
    is redirected), formatted as Airflow's task log lines, with the secrets it read masked. Nothing changes when
    that handler is in place already (a forked try whose worker installed it: nothing of the logging module is
    written to, so none of its pages is copied for the try's process)."""
    global _log_handler
    root = logging.getLogger()
    handler = log_handler(sys.stderr if stream is None else stream)
    if handler is _log_handler and logging.NOTSET < root.level <= logging.INFO and handler in root.handlers:
        return
    if _log_handler is not None:
        root.removeHandler(_log_handler)
    _log_handler = handler
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)


def release_logging() -> None:
    """After the try: its handler goes, and the root logger's level is Python's default again (a worker that
    runs several tries in turn logs nothing of its own into a try's log)."""
    global _log_handler
    if _log_handler is not None:
        logging.getLogger().removeHandler(_log_handler)
        _log_handler = None
        logging.getLogger().setLevel(logging.WARNING)


@contextlib.contextmanager
def set_aside() -> Iterator[None]:
    """While the block runs, the try's handler (if installed) is not: Python's logging is as in a process that runs
    no try (a worker importing a DAG file); then it is installed again, on the same stream."""
    handler = _log_handler
    if handler is None:
        yield
        return
    release_logging()
    try:
        yield
    finally:
        capture_logging(getattr(handler, "stream", None))
