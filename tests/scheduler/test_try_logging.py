"""A try's Python logging goes to its log through one handler per output stream, made once by the worker
before it forks (each try only installs it), with the secrets the try read masked; and the values of a task's
secret-looking arguments are masked whatever kind of mapping holds them."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

from ledger.scheduler.runtime import task_runner
from ledger.sdk import secrets


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """A stream the test sets as sys.stderr itself (pytest sets its own for each phase of a test)."""
    yield io.StringIO()
    task_runner.release_logging()


def test_tries_on_the_same_stream_share_one_handler_and_a_new_stream_gets_its_own(
        stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    made = task_runner.log_handler(stderr)
    task_runner.capture_logging()
    assert logging.getLogger().handlers.count(made) == 1
    task_runner.release_logging()
    task_runner.capture_logging()  # the next try
    assert logging.getLogger().handlers.count(made) == 1
    other = io.StringIO()
    assert task_runner.log_handler(other) is not made and task_runner.log_handler(other).stream is other


def test_the_shared_handler_still_masks_what_the_try_read(stderr: io.StringIO,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(secrets, "_seen", set())  # (this process's, for the test alone)
    task_runner.capture_logging()
    secrets.seen("hunter2-token")
    logging.getLogger("task").info("connecting with %s", "hunter2-token")
    assert "connecting with ***" in stderr.getvalue() and "hunter2-token" not in stderr.getvalue()


class _Task:
    template_fields = ("env",)
    mappable_fields = ()

    def __init__(self, env: Any, op_kwargs: Any) -> None:
        self.env, self.op_kwargs = env, op_kwargs


def test_secret_arguments_in_any_mapping_or_sequence_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_seen", set())
    task = _Task(MappingProxyType({"DB_PASSWORD": "proxy-secret", "plain": "shown-value"}),
                 {"nested": [{"api_key": ("tuple-secret", 12345)}], "n": None})
    secrets.seen_arguments(task)
    text = secrets.mask("proxy-secret tuple-secret 12345 shown-value")
    assert text == "*** *** *** shown-value"
