"""Where ledger keeps its files and database, read from the environment once per command."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    database_url: str
    dags_folder: Path

    @property
    def logs_folder(self) -> Path:
        return self.home / "logs"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def load_settings(env: dict[str, str] | None = None, *, dags_folder: str | Path | None = None) -> Settings:
    """Settings from LEDGER_HOME, LEDGER_DATABASE_URL and LEDGER_DAGS_FOLDER (or the --dags-folder flag)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("LEDGER_HOME") or Path.home() / ".ledger").expanduser().resolve()
    url = env.get("LEDGER_DATABASE_URL") or f"sqlite:///{home / 'ledger.db'}"
    folder = dags_folder or env.get("LEDGER_DAGS_FOLDER") or home / "dags"
    return Settings(home=home, database_url=url, dags_folder=Path(folder).expanduser().resolve())
