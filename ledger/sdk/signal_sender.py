"""Sending a signal from a running task (`context.send_signal`), through the client of task code
(ledger/sdk/ledger_client.py): to the database where the try has it, to ledger's webserver on a Celery worker."""

from __future__ import annotations

from typing import Any

from ledger.core.signals import Signal
from ledger.sdk.ledger_client import client


def send_from_task(key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
    return client().send_signal(key, value, sender=sender, meta=meta)
