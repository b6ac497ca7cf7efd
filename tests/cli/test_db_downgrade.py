"""A downgrade that would drop the code DAG versions ran is refused, changing nothing; forced, it records what it
dropped, and no run then claims to know what code it ran."""

from __future__ import annotations

import pytest
from alembic import command

from ledger.store.db import alembic_config
from ledger.store.schema import HEAD
from tests.cli.test_truthful_cli import dump
from tests.conftest import DAILY_DAG, Cli


@pytest.fixture
def ran(ready_cli: Cli) -> Cli:
    """A database whose DAG version has captured code and whose tries recorded the version they ran."""
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG.replace('schedule="@daily"', "schedule=None"))
    cli.ok("trigger", "daily", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    assert {t["state"] for t in cli.json("runs", "show", "1")["task_instances"]} == {"success"}
    return cli


def test_a_downgrade_that_drops_captured_code_is_refused_in_one_line_and_changes_nothing(ran: Cli) -> None:
    cli = ran
    before = dump(cli)
    below_0006 = f"-{int(HEAD) - 5}"  # relative: from the head to 0005, past 0006 (which drops the code)
    for target in ("0005", below_0006, "base"):
        refused = cli.fails("db", "downgrade", "--", target)
        assert refused.exit_code == 1
        assert refused.stderr == (
            f"Error: refusing to downgrade to {target}: it drops the code of 1 DAG version(s) and the record of "
            "which version 2 tries ran, and runs could no longer say what code they ran; back the database up, "
            "then pass --force to drop them (recorded as code_dropped events)\n")
        assert dump(cli) == before
    assert "to 0007" in cli.ok("db", "downgrade", "0007")  # keeps the code: allowed
    cli.ok("db", "upgrade")


def test_a_plain_alembic_downgrade_is_refused_by_the_migration_itself(ran: Cli) -> None:
    config = alembic_config(f"sqlite:///{ran.home / 'ledger.db'}")
    command.downgrade(config, "0006")
    with pytest.raises(RuntimeError, match="refusing to undo migration 0006: it drops the code of 1 DAG version"):
        command.downgrade(config, "0005")


def test_a_forced_downgrade_records_what_it_dropped_and_runs_show_says_the_code_is_unknown(ran: Cli) -> None:
    """And the run is re-run only on the version its DAG file is today: a plain clear would run today's file under
    the dropped version's name, so it is refused, in one line, changing nothing; --on-latest-version parses the
    file and re-runs the run on the version the file is now, whose code is kept."""
    cli = ran
    (version,) = [v["version"] for v in cli.json("dags", "versions", "daily")]
    assert "to 0005" in cli.ok("db", "downgrade", "0005", "--force")
    cli.ok("db", "upgrade")
    (event,) = [e for e in cli.json("events") if e["kind"] == "code_dropped"]
    assert event["dag_id"] == "daily" and event["details"] == {"versions": [version], "migration": "0006",
                                                               "tries": 2}
    code = cli.json("runs", "show", "1")["code"]
    assert code["captured"] is False and code["dropped"]["migration"] == "0006"
    shown = cli.ok("runs", "show", "1")
    assert "unknown: this version's code was dropped by a forced database downgrade" in shown
    assert "today's helpers" not in shown
    assert "unknown (dropped by a forced database downgrade" in cli.ok("dags", "versions", "daily")

    cli.write_dag("daily.py", DAILY_DAG.replace('schedule="@daily"', "schedule=None").replace("echo", "echo edited"))
    before = dump(cli)
    refused = cli.fails("tasks", "clear", "daily", "1")
    assert refused.exit_code == 1 and len(refused.stderr.splitlines()) == 1
    assert "was dropped by a forced database downgrade" in refused.stderr, refused.stderr
    assert "--on-latest-version re-runs the run" in refused.stderr
    assert dump(cli) == before
    moved = cli.ok("tasks", "clear", "daily", "1", "--on-latest-version")
    assert "run 1 moved from version" in moved, moved
    now_code = cli.json("runs", "show", "1")["code"]
    assert now_code["captured"] is True and now_code["dropped"] is None


def test_an_empty_database_goes_down_to_base_without_force(cli: Cli) -> None:
    cli.ok("db", "upgrade")
    assert "to base" in cli.ok("db", "downgrade", "base")
