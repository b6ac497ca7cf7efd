"""A try's Python logging goes to its log through one handler per output stream, made once by the worker
before it forks (a LocalExecutor's worker installs it too, and its tries find it in place), with the secrets the try
read masked; and the values of a task's
secret-looking arguments are masked whatever kind of mapping holds them."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

from ledger.scheduler.runtime import try_logging
from ledger.sdk import secrets


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """A stream the test sets as sys.stderr itself (pytest sets its own for each phase of a test)."""
    yield io.StringIO()
    try_logging.release_logging()


def test_tries_on_the_same_stream_share_one_handler_and_a_new_stream_gets_its_own(
        stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    made = try_logging.log_handler(stderr)
    try_logging.capture_logging()
    assert logging.getLogger().handlers.count(made) == 1
    try_logging.release_logging()
    try_logging.capture_logging()  # the next try
    assert logging.getLogger().handlers.count(made) == 1
    other = io.StringIO()
    assert try_logging.log_handler(other) is not made and try_logging.log_handler(other).stream is other


def test_a_try_that_finds_its_handler_in_place_changes_nothing_of_the_logging_module(
        stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    try_logging.capture_logging(stderr)  # the worker, before it forks
    monkeypatch.setattr(sys, "stderr", stderr)  # the try's process, its output redirected to the same stream
    root = logging.getLogger()
    changes: list[str] = []
    for name in ("addHandler", "removeHandler", "setLevel"):  # (on the instance, for this call alone: pytest's
        setattr(root, name, lambda *args, name=name: changes.append(name))  # own logging uses them between phases)
    try:
        try_logging.capture_logging()
    finally:
        for name in ("addHandler", "removeHandler", "setLevel"):
            delattr(root, name)
    assert changes == []
    assert root.handlers.count(try_logging.log_handler(stderr)) == 1 and root.level == logging.INFO


def test_the_shared_handler_still_masks_what_the_try_read(stderr: io.StringIO,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(secrets, "_seen", set())  # (this process's, for the test alone)
    try_logging.capture_logging()
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
