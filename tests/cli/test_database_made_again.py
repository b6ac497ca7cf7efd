"""A database made again in the same LEDGER_HOME (its ids start at 1 again) writes its tries' logs afresh: the
logs an earlier database left there are moved aside, not written after (decision 0350)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli

DAG_SAYING = """
import pendulum
from ledger import DAG, BashTask

with DAG("daily", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    BashTask("a", "echo {word}")
"""


def _run_once(cli: Cli, word: str, **env: str) -> tuple[str, str]:
    """The DAG saying `word` triggered and run by `ledger scheduler`: what the scheduler said, the try's log."""
    cli.write_dag("daily.py", DAG_SAYING.format(word=word))
    cli.ok("trigger", "daily", "--logical-date", "2024-03-01", **env)
    said = cli.ok("scheduler", "--exit-when-idle", **env)
    assert [t["state"] for t in json.loads(cli.ok("runs", "show", "1", "--json", **env))["task_instances"]] == \
        ["success"]
    return said, cli.ok("tasks", "logs", "daily", "1", "a", **env)


def _moved(home: Path) -> list[Path]:
    return sorted(p for p in home.iterdir() if p.name.startswith("logs."))


def test_a_database_removed_and_upgraded_again_writes_its_first_tries_logs_afresh(cli: Cli) -> None:
    cli.ok("db", "upgrade")
    assert "first-database" in _run_once(cli, "first-database")[1]
    (cli.home / "ledger.db").unlink()
    upgraded = cli.ok("db", "upgrade")
    said, log = _run_once(cli, "second-database")
    assert "second-database" in log and "first-database" not in log
    [aside] = _moved(cli.home)
    assert f"moved the logs of an earlier database from {cli.home / 'logs'} to {aside}" in upgraded
    assert "moved the logs" not in said
    assert "first-database" in (aside / "daily" / "run_1" / "a" / "try_1.log").read_text()


def test_a_scheduler_moves_aside_the_logs_of_a_database_made_again_elsewhere(cli: Cli, tmp_path: Path) -> None:
    database = tmp_path / "shared.db"
    url = f"sqlite:///{database}"
    cli.ok("db", "upgrade", LEDGER_DATABASE_URL=url)
    assert "first-database" in _run_once(cli, "first-database", LEDGER_DATABASE_URL=url)[1]
    database.unlink()  # made again from another host, whose LEDGER_HOME is its own
    other_home = tmp_path / "other-host"
    other_home.mkdir()
    cli.ok("db", "upgrade", LEDGER_DATABASE_URL=url, LEDGER_HOME=str(other_home))
    assert _moved(cli.home) == []
    said, log = _run_once(cli, "second-database", LEDGER_DATABASE_URL=url)
    assert "second-database" in log and "first-database" not in log
    [aside] = _moved(cli.home)
    assert f"moved the logs of an earlier database from {cli.home / 'logs'} to {aside}" in said
    assert "first-database" in (aside / "daily" / "run_1" / "a" / "try_1.log").read_text()



def test_a_reader_never_takes_an_earlier_databases_log_file_for_a_try_of_this_one(cli: Cli, tmp_path: Path) -> None:
    """The database made again and run from another host: on this host no job has started since, so its logs
    folder is still the earlier database's; `ledger tasks logs` here says the try's log is not here rather than
    show the earlier database's try of the same ids."""
    database = tmp_path / "shared.db"
    url = f"sqlite:///{database}"
    cli.ok("db", "upgrade", LEDGER_DATABASE_URL=url)
    assert "first-database" in _run_once(cli, "first-database", LEDGER_DATABASE_URL=url)[1]
    database.unlink()
    other_home = tmp_path / "other-host"
    other_home.mkdir()
    there = {"LEDGER_DATABASE_URL": url, "LEDGER_HOME": str(other_home), "LEDGER_DAGS_FOLDER": str(cli.dags)}
    cli.ok("db", "upgrade", **there)
    assert "second-database" in _run_once(cli, "second-database", **there)[1]
    here = cli.run("tasks", "logs", "daily", "1", "a", LEDGER_DATABASE_URL=url)
    assert "first-database" not in here.stdout
    assert here.exit_code != 0 and "no log for try 1 of 'a' in run 1" in here.stderr
    assert _moved(cli.home) == []  # a reader moves nothing
