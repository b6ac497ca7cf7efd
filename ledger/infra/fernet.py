"""The Fernet keys that encrypt the stored secrets (how they are used: ledger/sdk/secrets.py):
LEDGER_FERNET_KEY when set, else the file `fernet.key` in LEDGER_HOME, made (mode 0600) the first time a secret is
stored. Either holds one key or several (separated by commas or lines): the first encrypts, any decrypts, and
`ledger db rotate-fernet-key` re-encrypts every stored secret with the first."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from ledger.core.errors import ConfigError

KEY_HINT = ("copy the key file from the host that stored the secrets, or set LEDGER_FERNET_KEY to the key "
            "(docs/operations.md: Secrets and the Fernet key)")

KEY_FILE = "fernet.key"  # in LEDGER_HOME: the keys when LEDGER_FERNET_KEY is not set


def key_file(home: Path) -> Path:
    return home / KEY_FILE


def parse_keys(text: str) -> list[str]:
    """The keys of LEDGER_FERNET_KEY or of the key file: separated by commas or lines, blanks ignored."""
    return [k.strip() for k in text.replace("\n", ",").split(",") if k.strip()]


def create_key_file(path: Path) -> str:
    """The text of the key file at `path`, made with a new key (mode 0600) if there is none yet.

    The key is written to a private temporary file that is then hard-linked to `path`: the link fails when
    the file exists, so processes that race here all end up with the one key that won, and none ever
    reads a half-written file."""
    from cryptography.fernet import Fernet

    try:
        return path.read_text(encoding="ascii")
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(Fernet.generate_key().decode() + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use its key
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="ascii")


def _home() -> Path:
    from ledger.infra.config import load_settings

    return load_settings().home


def fernet_keys(*, create: bool = False) -> tuple[list[str], str]:
    """(keys, where they come from): LEDGER_FERNET_KEY when set, else LEDGER_HOME's key file (made with a new
    key when `create` and there is none). ConfigError when there is no key and `create` is false."""
    raw = os.environ.get("LEDGER_FERNET_KEY", "").strip()
    if raw:
        return parse_keys(raw), "LEDGER_FERNET_KEY"
    path = key_file(_home())
    try:
        text = create_key_file(path) if create else path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigError(f"no Fernet key: LEDGER_FERNET_KEY is not set and {path} does not exist; {KEY_HINT}") \
            from None
    except OSError as exc:
        raise ConfigError(f"cannot read the Fernet key file {path}: {exc.strerror}; {KEY_HINT}") from None
    keys = parse_keys(text)
    if not keys:
        raise ConfigError(f"the Fernet key file {path} holds no key; {KEY_HINT}")
    return keys, str(path)


def _fernet(*, create: bool = False) -> Any:
    from cryptography.fernet import Fernet, MultiFernet

    keys, where = fernet_keys(create=create)
    try:
        return MultiFernet([Fernet(k.encode()) for k in keys])
    except (ValueError, TypeError):
        raise ConfigError(f"{where} is not a valid Fernet key; {KEY_HINT}") from None


def encrypt(text: str) -> str:
    """`text` encrypted with the first key (the key file is made on first need)."""
    return str(_fernet(create=True).encrypt(text.encode()).decode())


def decrypt(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return str(_fernet().decrypt(token.encode()).decode())
    except InvalidToken:
        raise ConfigError(f"a stored secret cannot be decrypted with the Fernet key in {fernet_keys()[1]} (was "
                          "the key changed? keep the old key after the new one, separated by a comma)") from None


def rotate(token: str) -> str:
    """A stored secret encrypted again with the first key (any key may decrypt it); ConfigError when none can."""
    from cryptography.fernet import InvalidToken

    try:
        return str(_fernet().rotate(token.encode()).decode())
    except InvalidToken:
        raise ConfigError(f"a stored secret cannot be decrypted with the Fernet keys in {fernet_keys()[1]}") \
            from None
