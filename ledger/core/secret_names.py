"""Which names say their values are secrets: a variable's, a key of a task's arguments, of a connection's extra."""

from __future__ import annotations

# Airflow's DEFAULT_SENSITIVE_FIELDS (airflow/utils/log/secrets_masker.py), and credential, access_key and auth
SENSITIVE = ("access_token", "api_key", "apikey", "authorization", "passphrase", "passwd", "password",
             "private_key", "secret", "token", "keyfile_dict", "service_account", "credential", "access_key", "auth")


def sensitive(name: str) -> bool:
    """A name that says its value is a secret (as Airflow decides what to mask: any of SENSITIVE in it, in any
    case): a variable's name, a key of a task's arguments (`env={"DB_PASSWORD": ...}`), of a connection's extra."""
    lowered = name.lower()
    return any(word in lowered for word in SENSITIVE)
