"""Sending signals from a running task: one engine per process, built from the environment on first use."""

from __future__ import annotations

from typing import Any

from ledger.core.signals import Signal
from ledger.infra.clock import SystemClock
from ledger.infra.config import load_settings
from ledger.services.signal_service import SignalService
from ledger.store.db import make_engine, make_sessions

_service: SignalService | None = None


def send_from_task(key: str, value: str, *, sender: str, meta: dict[str, Any] | None = None) -> Signal:
    global _service
    if _service is None:
        settings = load_settings()
        engine = make_engine(settings.database_url)
        _service = SignalService(engine, make_sessions(engine), settings.home, clock=SystemClock())
    return _service.send(key, value, sender=sender, meta=meta)
