"""What the CLI prints and records is true, and a refused command changes nothing: the whole database is
dumped before and after each refused command and compared."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
import sqlalchemy

from ledger.store.db import make_read_engine
from tests import launcher
from tests.conftest import DAILY_DAG, LEDGER, Cli

ENDING_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("ending", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 10, tz="UTC")) as dag:
    BashTask("a", "echo {word}")
"""


def dump(cli: Cli) -> list[str]:
    """Every row of every table, as SQL text (sqlite3's iterdump), read without writing."""
    conn = sqlite3.connect(f"file:{cli.home / 'ledger.db'}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_a_refused_command_leaves_the_database_exactly_as_it_was_even_after_a_dag_file_changed(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ending.py", ENDING_DAG.format(word="one"))
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "ending", "--logical-date", "2024-03-02")
    cli.write_dag("ending.py", ENDING_DAG.format(word="two"))  # a new version is waiting to be registered
    before = dump(cli)
    refused = [
        ("backfill", "ending", "--start", "2024-03-05", "--end", "2024-03-01", "--yes"),
        ("trigger", "ending", "--logical-date", "garbage"),
        ("trigger", "ending", "--logical-date", "1900-01-01"),
        ("trigger", "ending", "--logical-date", "2024-02-29"),
        ("trigger", "ending", "--logical-date", "2024-03-11"),
        ("trigger", "ending", "--logical-date", "9999-12-31"),
        ("trigger", "ending", "--logical-date", "0001-01-01"),
        ("trigger", "ending", "--logical-date", "2024-03-02"),  # held by a live run
        ("trigger", "ending", "--conf", "[1]"),
        ("dags", "show", "ending", "--version", "ffff"),
    ]
    for args in refused:
        result = cli.fails(*args)
        assert result.stderr.startswith("Error: "), (args, result.stderr)
        assert dump(cli) == before, f"`ledger {' '.join(args)}` changed the database"
    # the accepted command that follows registers the new version together with its own change
    cli.ok("trigger", "ending", "--logical-date", "2024-03-03")
    versions = cli.json("dags", "versions", "ending")
    assert len(versions) == 2


def test_trigger_refuses_dates_outside_the_dags_life_in_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ending.py", ENDING_DAG.format(word="one"))
    assert "before DAG 'ending' starts" in cli.fails("trigger", "ending", "--logical-date", "1900-01-01").stderr
    assert "after DAG 'ending' ends" in cli.fails("trigger", "ending", "--logical-date", "2024-03-11").stderr
    assert "out of range" in cli.fails("trigger", "ending", "--logical-date", "9999-12-31").stderr
    assert "out of range" in cli.fails("trigger", "ending", "--logical-date", "0001-01-01").stderr
    cli.ok("trigger", "ending", "--logical-date", "2024-03-10")  # the last date is inside
    assert [r["logical_date"][:10] for r in cli.json("timeline", "ending")] == ["2024-03-10"]


def test_events_of_an_unknown_dag_is_an_error(ready_cli: Cli) -> None:
    assert "no DAG named 'nosuchdag'" in ready_cli.fails("events", "--dag", "nosuchdag").stderr


def test_usage_errors_are_one_line_with_exit_status_2(ready_cli: Cli) -> None:
    cases = {("pools", "set", "p", "-1"): "slots must be 0 or more",
             ("trigger",): "Missing argument",
             ("nosuchcommand",): "No such command",
             ("pools", "set", "p", "many"): "Invalid value for 'slots'"}
    for args, text in cases.items():
        result = ready_cli.run(*args)
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and text in lines[0], (args, result.stderr)
        assert "╭" not in result.output


@pytest.mark.parametrize(("url", "text"), [
    ("mysql://u@localhost/db", "not supported; use sqlite:///PATH or postgresql://"),
    ("postgresql+psycopg2://u@localhost/db", "driver 'psycopg2'"),
    ("nonsense", "is not a database URL"),
])
def test_unsupported_database_urls_are_one_line(cli: Cli, url: str, text: str) -> None:
    result = cli_fails_env(cli, url)
    assert text in result.stderr


def cli_fails_env(cli: Cli, url: str) -> subprocess.CompletedProcess[str]:
    done = launcher.run([LEDGER, "events"], capture_output=True, text=True, cwd=cli.home,
                        env={**cli.env, "LEDGER_DATABASE_URL": url}, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr
    return done


@pytest.mark.postgres
def test_a_postgresql_url_without_a_driver_uses_psycopg(cli: Cli, postgres_url: str) -> None:
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    cli.env["LEDGER_DATABASE_URL"] = plain
    assert "upgraded" in cli.ok("db", "upgrade")
    cli.ok("events")
    engine = make_read_engine(postgres_url)  # what read commands use: every transaction is READ ONLY
    try:
        with engine.connect() as conn, pytest.raises(sqlalchemy.exc.InternalError, match="read-only transaction"):
            conn.execute(sqlalchemy.text("CREATE TABLE written (a int)"))
    finally:
        engine.dispose()


def test_ledger_home_that_is_a_file_is_one_line(tmp_path: Path, cli: Cli) -> None:
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    cli.env["LEDGER_HOME"] = str(home)
    assert "is a file, not a folder" in cli.fails("events").stderr


def test_db_upgrade_where_the_databases_folder_cannot_be_made_is_one_line(tmp_path: Path, cli: Cli) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    cli.env["LEDGER_DATABASE_URL"] = f"sqlite:///{a_file / 'sub' / 'ledger.db'}"
    assert f"cannot make the database's folder {a_file / 'sub'}" in cli.fails("db", "upgrade").stderr
    assert a_file.read_text() == "not a folder"


def test_a_database_a_newer_ledger_upgraded_is_named_so_and_not_upgraded(ready_cli: Cli) -> None:
    db = sqlite3.connect(str(ready_cli.home / "ledger.db"))
    with db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    db.close()
    for args in (("db", "check"), ("db", "upgrade"), ("events",)):
        said = ready_cli.fails(*args).stderr
        assert "revision 9999, newer than this ledger's" in said and "run `ledger db upgrade`" not in said, said
    assert sqlite3.connect(str(ready_cli.home / "ledger.db")).execute(
        "SELECT version_num FROM alembic_version").fetchall() == [("9999",)]


def test_a_command_without_a_database_creates_nothing(tmp_path: Path, cli: Cli) -> None:
    home = tmp_path / "fresh" / "home"
    cli.env["LEDGER_HOME"] = str(home)
    cli.env["LEDGER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'elsewhere' / 'deep' / 'ledger.db'}"
    for args in (("events",), ("timeline", "x"), ("db", "check"), ("db", "downgrade")):
        cli.fails(*args)
    assert not (tmp_path / "fresh").exists() and not (tmp_path / "elsewhere").exists()


def test_reads_do_not_wait_for_a_writer(ready_cli: Cli) -> None:
    """Another process holds SQLite's write lock (a scheduler in its transaction): read commands answer
    at once instead of waiting for it (they used to take the write lock too)."""
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")
    writer = sqlite3.connect(str(cli.home / "ledger.db"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        # the lock is held until `finally`: a command that asked for it would wait out the busy timeout and fail
        for args in (("timeline", "daily"), ("events", "--dag", "daily"), ("runs", "show", "1")):
            cli.ok(*args)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def _immutable(paths: list[Path], on: bool) -> bool:
    """chattr +i: not even root may write (the suite runs as root, for which file modes mean nothing)."""
    return subprocess.run(["chattr", "+i" if on else "-i", *map(str, paths)], capture_output=True).returncode == 0


def test_read_commands_work_on_a_read_only_ledger_home(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")
    cli.ok("pools", "set", "spark", "2")
    before = dump(cli)
    last = sqlite3.connect(str(cli.home / "ledger.db"))  # the last connection to close removes -wal and -shm
    last.execute("SELECT count(*) FROM sqlite_master").fetchall()
    last.close()
    assert not list(cli.home.glob("ledger.db-*"))  # so a reader cannot create them: the hard case
    locked = [cli.home / "ledger.db", cli.home]
    if not _immutable(locked, True):
        if os.environ.get("CI"):
            raise AssertionError("chattr +i is needed for this test")
        pytest.skip("this file system cannot make files immutable (chattr +i)")
    try:
        for args in (("timeline", "daily"), ("events", "--dag", "daily"), ("runs", "show", "1"), ("db", "check"),
                     ("pools", "list"), ("lineage", "sales"), ("tasks", "logs", "daily", "1", "a"),
                     ("backfill", "list"), ("signal", "list", "any.key")):
            result = cli.run(*args)
            assert "readonly" not in result.stderr and "unable to open" not in result.stderr, (args, result.stderr)
            assert result.exit_code in (0, 1), (args, result.stderr)
            if args[0] in ("timeline", "events", "runs", "db", "pools", "backfill"):
                assert result.exit_code == 0, (args, result.stderr)
        assert cli.json("timeline", "daily")[0]["logical_date"].startswith("2024-03-02")
        refused = cli.fails("trigger", "daily", "--logical-date", "2024-03-03")
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    finally:
        _immutable(locked, False)
    assert dump(cli) == before


NEXT_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("{dag_id}", schedule="{schedule}", start_date=pendulum.parse("{start}"), catchup={catchup}) as dag:
    BashTask("a", "true")
"""


@pytest.mark.parametrize(("dag_id", "schedule", "days_back", "catchup"), [
    ("daily6", "0 6 * * *", 5, False),
    ("hourly_off", "@hourly", 0.3, False),
    ("caught", "@daily", 3, True),
])
def test_next_runs_prints_what_the_scheduler_then_creates(ready_cli: Cli, dag_id: str, schedule: str,
                                                          days_back: float, catchup: bool) -> None:
    import pendulum

    cli = ready_cli
    start = pendulum.now("UTC").subtract(days=days_back).replace(second=17)  # off the schedule's ticks
    cli.write_dag(f"{dag_id}.py", NEXT_DAG.format(dag_id=dag_id, schedule=schedule, start=start.isoformat(),
                                                  catchup=catchup))
    predicted = [r["logical_date"] for r in cli.json("dags", "next-runs", dag_id, "-n", "10")]
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    created = sorted(r["logical_date"] for r in cli.json("timeline", dag_id))
    assert created and created == predicted[:len(created)], (predicted, created)
    # and what it prints next continues from there
    assert cli.json("dags", "next-runs", dag_id, "-n", "1")[0]["logical_date"] == predicted[len(created)]


def test_next_runs_skips_a_date_a_manual_run_holds(ready_cli: Cli) -> None:
    import pendulum

    cli = ready_cli
    start = pendulum.now("UTC").subtract(days=3).start_of("day")
    cli.write_dag("man2.py", NEXT_DAG.format(dag_id="man2", schedule="@daily", start=start.isoformat(),
                                             catchup=False))
    first = cli.json("dags", "next-runs", "man2", "-n", "2")
    cli.ok("trigger", "man2", "--logical-date", first[1]["logical_date"])
    after = [r["logical_date"] for r in cli.json("dags", "next-runs", "man2", "-n", "2")]
    assert first[1]["logical_date"] not in after and after[0] == first[0]["logical_date"]


def test_times_people_read_carry_their_offset_and_fit_80_columns(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("berlin.py", """
import pendulum
from ledger import DAG, BashTask

with DAG("berlin", schedule="@hourly", start_date=pendulum.datetime(2024, 10, 26, 22, tz="Europe/Berlin"),
         catchup=False) as dag:
    BashTask("a", "true")
""")
    for hour in (0, 1):  # 02:00 CEST and 02:00 CET: the same wall time twice that night
        cli.ok("trigger", "berlin", "--logical-date", f"2024-10-27T0{hour}:30:00+00:00")
    shown = cli.ok("timeline", "berlin", COLUMNS="80")
    assert "2024-10-27 02:00:00+02:00" in shown and "2024-10-27 02:00:00+01:00" in shown, shown
    assert [r["logical_date"] for r in cli.json("timeline", "berlin")] == [
        "2024-10-27T00:00:00+00:00", "2024-10-27T01:00:00+00:00"]  # --json stays ISO 8601 (UTC, with offset)
    listed = cli.ok("dags", "next-runs", "berlin", "-n", "2", COLUMNS="80")
    assert "…" not in listed and all(len(line) <= 80 for line in listed.splitlines()), listed
    assert "+01:00" in listed


def test_a_dag_file_raising_keyboardinterrupt_is_an_import_error_without_a_traceback(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("k.py", "raise KeyboardInterrupt\n")
    cli.write_dag("daily.py", DAILY_DAG)
    result = cli.run("dags", "list")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "k.py:1: KeyboardInterrupt" in cli.ok("dags", "errors")
    assert [d["dag_id"] for d in cli.json("dags", "list")] == ["daily"]


def test_dags_show_lists_the_airflow_default_args_ledger_ignores(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("af.py", """
import pendulum
from ledger import DAG, BashTask

with DAG("af", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         default_args={"owner": "data-eng", "sla": 60}) as dag:
    BashTask("a", "true")
""")
    shown = cli.ok("dags", "show", "af")
    assert "ignored default_args" in shown and "owner, sla" in shown, shown
