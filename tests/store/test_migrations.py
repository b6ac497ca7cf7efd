"""The schema is made only by migrations; upgrade and downgrade both work on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from ledger.db import alembic_config, current_revision, head_revision, make_engine
from ledger.models import Base


def assert_round_trip(url: str) -> None:
    cfg = alembic_config(url)
    engine = make_engine(url)
    command.upgrade(cfg, "head")
    assert current_revision(engine) == head_revision(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"
    command.downgrade(cfg, "base")
    assert current_revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    command.upgrade(cfg, "head")
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_sqlite_upgrades_to_head_matches_the_models_and_downgrades_to_base(tmp_path: Path) -> None:
    assert_round_trip(f"sqlite:///{tmp_path / 'ledger.db'}")


@pytest.mark.postgres
def test_postgres_upgrades_to_head_matches_the_models_and_downgrades_to_base(postgres_url: str) -> None:
    assert_round_trip(postgres_url)


def test_sqlite_database_uses_wal_mode(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_the_recorded_head_is_the_newest_migration(tmp_path: Path) -> None:
    from migrations.head import HEAD

    assert head_revision(f"sqlite:///{tmp_path / 'x.db'}") == HEAD
