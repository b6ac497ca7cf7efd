"""Every secret ledger knows of, for masking what it shows (`ledger tasks xcom`, the web view's documents). Task code
reads variables and connections with ledger/sdk/secrets.py; its names are kept here too, the path DAG files and the
docs have used (`from ledger.services.secrets import Variable, get_connection`)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger.core.errors import LedgerError
from ledger.core.secret_names import sensitive
from ledger.infra.fernet import decrypt
from ledger.sdk.connections import ConnectionInfo as ConnectionInfo
from ledger.sdk.secrets import MIN_MASKED, settings_secrets
from ledger.sdk.secrets import Variable as Variable
from ledger.sdk.secrets import get_connection as get_connection
from ledger.sdk.secrets import mask_value as mask_value

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def known_secrets(session: Session) -> frozenset[str]:
    """Every secret ledger knows of, for masking what it shows: the values of variables whose names say they are
    secret and connections' passwords (and their extras' secret-named fields), stored or in this process's
    environment (LEDGER_VAR_*, LEDGER_CONN_*), and ledger's own (settings_secrets). ConfigError when a stored
    secret cannot be decrypted: what is shown could then not be checked."""
    from ledger.store import secrets as store

    found: list[str | None] = list(settings_secrets())
    for row in store.variables(session):
        if sensitive(row.key):
            found.append(decrypt(row.value_encrypted))
    for conn in store.connections(session):
        found.append(decrypt(conn.password_encrypted) if conn.password_encrypted else None)
        found += _extra_secrets(decrypt(conn.extra_encrypted) if conn.extra_encrypted else None)
    for name, raw in os.environ.items():
        if name.startswith("LEDGER_VAR_") and sensitive(name[len("LEDGER_VAR_"):]):
            found.append(raw)
        elif name.startswith("LEDGER_CONN_"):
            try:
                info = ConnectionInfo.from_uri(name[len("LEDGER_CONN_"):].lower(), raw)
            except LedgerError:
                continue
            found += [info.password, *_extra_secrets(info.extra)]
    return frozenset(s for s in found if s and len(s) >= MIN_MASKED)


def _extra_secrets(extra: str | None) -> list[str]:
    """The values of a connection extra's secret-named fields (a JSON object; anything else: none)."""
    try:
        value = json.loads(extra or "{}")
    except json.JSONDecodeError:
        return []
    if not isinstance(value, dict):
        return []
    return [str(v) for k, v in value.items() if sensitive(str(k)) and isinstance(v, (str, int))]
