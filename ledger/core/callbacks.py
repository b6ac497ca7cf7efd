"""How a recorded callback is named in listings and the callback table (a pure rule over its description)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def callback_target(description: Mapping[str, Any]) -> str:
    """One line naming a recorded callback, for listings and the callback table."""
    if "notifier" in description:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(description.items()) if k != "notifier")
        return f"{description['notifier']}({args})"[:500]
    return str(description.get("callable", "?"))[:500]
