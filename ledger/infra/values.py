"""Reading values of settings: the one boolean parser (ledger/infra/settings.py has the table of settings)."""

from __future__ import annotations

from ledger.core.errors import ConfigError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def parse_bool(name: str, raw: str) -> bool:
    """The one reading of a boolean setting: 1/true/yes/on or 0/false/no/off (any case; empty is false)."""
    text = raw.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a valid bool (true or false)")
