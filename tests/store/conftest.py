"""The store's tests run on both databases the product supports: each test that takes `sessions` (or `session`)
runs on a copy of the session's migrated SQLite file and, marked postgres, on a copy of the session's migrated
PostgreSQL template (tests/conftest.py). A module that defines its own `sessions` keeps it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import copy_migrated, sessions_on


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        url = f"sqlite:///{copy_migrated(request.getfixturevalue('migrated_sqlite'), tmp_path / 'ledger.db')}"
    else:
        url = request.getfixturevalue("migrated_postgres_url")
    engine, made = sessions_on(url)
    yield made
    engine.dispose()
