"""The schema is made only by migrations; upgrade and downgrade both work on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from ledger.models import Base
from ledger.store.db import alembic_config, current_revision, head_revision, make_engine


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
    from ledger.store.schema import HEAD

    assert head_revision(f"sqlite:///{tmp_path / 'x.db'}") == HEAD


FULL_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("full", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True) as dag:
    a = BashTask("a", "echo a")
    b = BashTask("b", "echo b")
    a >> b
"""


def walk_down_and_up_with_data(cli: Any) -> None:
    """A database full of data (runs, tries, events, versions with code, signals) goes down one migration at a
    time to the first, up again to head with its data intact, then down to base."""
    from ledger.store.schema import HEAD

    cli.ok("db", "upgrade")
    cli.write_dag("full.py", FULL_DAG)
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    cli.ok("trigger", "full", "--logical-date", "2024-03-02", "--replace")
    cli.ok("signal", "send", "orders.ready", "2024-03-01")
    before = cli.json("timeline", "full", "--all")
    steps = int(HEAD)
    for n in range(steps - 1):  # below 0006 and 0003 the versions' code goes: refused unless forced
        out = cli.ok("db", "downgrade", *(["--force"] if f"{steps - n:04d}" in ("0006", "0003") else []))
        assert f"to {steps - n - 1:04d}" in out, out
    cli.ok("db", "upgrade")
    after = cli.json("timeline", "full", "--all")
    assert [(r["run_id"], r["state"]) for r in after] == [(r["run_id"], r["state"]) for r in before]
    assert cli.json("runs", "show", str(before[0]["run_id"]))["task_instances"]
    cli.ok("db", "downgrade", "base")
    cli.ok("db", "upgrade")


def test_every_migration_goes_down_and_up_on_a_sqlite_database_full_of_data(ready_cli: Any) -> None:
    walk_down_and_up_with_data(ready_cli)


@pytest.mark.postgres
def test_every_migration_goes_down_and_up_on_a_postgresql_database_full_of_data(cli: Any, postgres_url: str) -> None:
    cli.env["LEDGER_DATABASE_URL"] = postgres_url
    walk_down_and_up_with_data(cli)


MAPPED_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("mapped", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    BashTask.partial(task_id="m").expand(bash_command=["echo 0", "echo 1"])
"""


def test_a_0007_database_with_task_instances_upgrades_to_mapped_instances(ready_cli: Any) -> None:
    """Task instances made before mapping existed become map_index -1 (not mapped); their runs show as before,
    and mapped runs can be made in the upgraded database."""
    import sqlite3

    cli = ready_cli
    cli.write_dag("full.py", FULL_DAG)
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    assert "to 0007" in cli.ok("db", "downgrade", "0007")
    db = sqlite3.connect(cli.home / "ledger.db")
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(task_instance)")]
        before = db.execute("SELECT id, run_id, task_id, state, try_number FROM task_instance ORDER BY id").fetchall()
    finally:
        db.close()
    assert "map_index" not in columns and len(before) == 6  # three runs of two tasks
    cli.ok("db", "upgrade")
    db = sqlite3.connect(cli.home / "ledger.db")
    try:
        after = db.execute("SELECT id, run_id, task_id, state, try_number, map_index FROM task_instance "
                           "ORDER BY id").fetchall()
    finally:
        db.close()
    assert after == [(*row, -1) for row in before]
    shown = cli.json("runs", "show", "1")
    assert [(t["label"], t["map_index"], t["state"]) for t in shown["task_instances"]] == [
        ("a", -1, "success"), ("b", -1, "success")]
    cli.write_dag("mapped.py", MAPPED_DAG)
    cli.ok("trigger", "mapped", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    assert "0" in cli.ok("tasks", "logs", "mapped", "4", "m", "--map-index", "0")


def test_a_database_upgraded_to_0015_keeps_the_task_ids_of_its_task_instances_and_gives_new_ones_its_identity(
        ready_cli: Any) -> None:
    """Tries a worker may still run through the upgrade are found under the task ids they were sent with; the
    task instances made after carry the database's identity (decision 0344)."""
    import sqlite3

    from ledger.infra.workers import DatabaseIdentity, task_id

    cli = ready_cli
    cli.write_dag("full.py", FULL_DAG)
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    out = cli.ok("db", "downgrade", "0014")
    assert "dropping the database's identity" in out and "to 0014" in out, out
    cli.ok("db", "upgrade")
    cli.ok("trigger", "full", "--logical-date", "2024-03-02", "--replace")
    db = sqlite3.connect(cli.home / "ledger.db")
    try:
        [(identity, legacy_through)] = db.execute("SELECT identity, legacy_through FROM database_identity").fetchall()
        ids = [ti for (ti,) in db.execute("SELECT id FROM task_instance ORDER BY id")]
    finally:
        db.close()
    assert legacy_through == 6 and ids == [1, 2, 3, 4, 5, 6, 7, 8]  # three runs of two tasks, then the replacement
    assert len(identity) == 8 and int(identity, 16) >= 0
    names = [task_id(ti, 1, DatabaseIdentity(identity, legacy_through).of(ti)) for ti in ids]
    assert names[:6] == [f"ledger-{ti}-1" for ti in range(1, 7)]
    assert names[6:] == [f"ledger-{identity}-7-1", f"ledger-{identity}-8-1"]


def test_a_database_upgraded_to_0017_gives_each_task_instance_one_pool_slot(ready_cli: Any) -> None:
    """Task instances made before pool_slots existed take one slot of their pool each, as they took before."""
    import sqlite3

    cli = ready_cli
    cli.write_dag("full.py", FULL_DAG)
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    out = cli.ok("db", "downgrade", "0016")
    assert "each task instance's pool slots" in out and "to 0016" in out, out
    cli.ok("db", "upgrade")
    db = sqlite3.connect(cli.home / "ledger.db")
    try:
        slots = [n for (n,) in db.execute("SELECT pool_slots FROM task_instance ORDER BY id")]
    finally:
        db.close()
    assert slots == [1] * 6  # three runs of two tasks
    shown = cli.json("runs", "show", "1")
    assert {t["pool_slots"] for t in shown["task_instances"]} == {1}
