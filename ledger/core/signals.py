"""Signals: (key, value) messages, versioned per key, kept forever and delivered to listeners.

This module is pure (no I/O): what a signal is and which keys and values are accepted.

- A **key** names a stream of signals, like ``dag:daily_sales:done`` or ``task/daily/extract``. It has
  1 to 200 characters from letters (ASCII), digits and ``_ . : / -``, and starts with a letter or a
  digit (:data:`KEY_PATTERN`). The set is small on purpose: a key is safe in a shell, in a URL, in a
  file name (after replacing ``/``) and in log lines, and cannot hide whitespace or control characters.
- A **value** is any UTF-8 text up to :data:`MAX_VALUE_BYTES` bytes (64 KiB), without NUL characters
  (PostgreSQL text cannot hold them). Larger payloads belong in files or tables; a signal should say
  where they are.
- A **version** numbers the signals of one key: 1, 2, 3, ... without gaps, in commit order. A
  listener remembers, per key, the last version it was given (its cursor), so it can tell exactly
  what it missed. Storage and delivery live in ``ledger.store.signals``, ``ledger.services.signal_delivery``
  and ``ledger.services.signal_service``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.core.errors import InvalidInput

KEY_PATTERN: re.Pattern[str] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$")
"""Letters, digits and ``_ . : / -``; 1 to 200 characters; starts with a letter or a digit."""

MAX_KEY_LENGTH = 200
MAX_VALUE_BYTES = 65536
"""The largest value, in UTF-8 bytes."""

_KEY_CHARS = re.compile(r"[A-Za-z0-9_.:/-]*")


def _shown(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def is_valid_key(key: str) -> bool:
    """Whether `validate_key` would accept `key` (cheap; for keys built from names that may not fit)."""
    return isinstance(key, str) and KEY_PATTERN.fullmatch(key) is not None


def validate_key(key: str) -> str:
    """The key itself, or InvalidInput with one line saying what is wrong with it."""
    if not isinstance(key, str):
        raise InvalidInput(f"signal key must be text, not {type(key).__name__}")
    if key == "":
        raise InvalidInput("signal key '' is empty")
    if KEY_PATTERN.fullmatch(key):
        return key
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(f"signal key {_shown(key)} is {len(key)} characters; the limit is {MAX_KEY_LENGTH}")
    if not _KEY_CHARS.fullmatch(key):
        raise InvalidInput(f"signal key {_shown(key)} has characters outside letters, digits and _ . : / -")
    raise InvalidInput(f"signal key {_shown(key)} must start with a letter or a digit")


def validate_value(value: str) -> str:
    """The value itself, or InvalidInput with one line saying what is wrong with it."""
    if not isinstance(value, str):
        raise InvalidInput(f"signal value must be text, not {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput("signal value is not valid UTF-8 text") from None
    if size > MAX_VALUE_BYTES:
        raise InvalidInput(f"signal value is {size} bytes; the limit is {MAX_VALUE_BYTES}")
    if "\x00" in value:
        raise InvalidInput("signal value contains a NUL character")
    return value


def validate_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """Meta is None or a JSON object (kept with the signal and in its event)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise InvalidInput(f"signal meta must be a JSON object, not {type(meta).__name__}")
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"signal meta is not JSON: {exc}") from None
    return meta


@dataclass(frozen=True, slots=True)
class Signal:
    """One stored signal: the `version`-th signal sent on `key`."""

    id: int
    key: str
    version: int
    value: str
    sender: str
    sent_at: datetime
    meta: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {"id": int(self.id), "key": self.key, "version": int(self.version), "value": self.value,
                "sender": self.sender, "sent_at": self.sent_at.isoformat(), "meta": self.meta}
