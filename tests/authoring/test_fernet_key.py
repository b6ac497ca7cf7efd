"""The Fernet key: made in LEDGER_HOME on first need (private, one key even when processes race), overridden by
LEDGER_FERNET_KEY, rotated by `ledger db rotate-fernet-key`."""

from __future__ import annotations

import multiprocessing
import sqlite3
import stat
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from ledger.infra.fernet import create_key_file, parse_keys
from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli


def test_the_first_secret_stored_makes_a_private_key_file_and_the_environment_wins(ready_cli: Cli) -> None:
    cli = ready_cli
    key_file = cli.home / "fernet.key"
    assert not key_file.exists()
    assert cli.ok("variables", "set", "greeting", "hello") == "variable greeting created\n"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    (file_key,) = parse_keys(key_file.read_text())
    assert cli.ok("variables", "get", "greeting") == "hello\n"
    assert cli.ok("variables", "set", "greeting", "hello again") and parse_keys(key_file.read_text()) == [file_key]

    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()  # set: the file is not read
    refused = cli.fails("variables", "get", "greeting")
    assert "cannot be decrypted with the Fernet key in LEDGER_FERNET_KEY" in refused.stderr
    cli.env["LEDGER_FERNET_KEY"] += "," + file_key  # the new key first, the file's after it: both decrypt
    assert cli.ok("variables", "get", "greeting") == "hello again\n"


def test_without_a_key_reading_a_secret_is_one_line_and_makes_no_key(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "greeting", "hello")
    del cli.env["LEDGER_FERNET_KEY"]
    before = dump(cli)
    refused = cli.fails("variables", "get", "greeting")
    assert "no Fernet key" in refused.stderr and "LEDGER_FERNET_KEY" in refused.stderr
    assert not (cli.home / "fernet.key").exists() and dump(cli) == before


def _make_key(path: str, ready: Any, found: Any) -> None:  # runs in a child process
    ready.wait()
    found.put(create_key_file(Path(path)))


def test_processes_racing_to_make_the_key_file_all_get_the_one_key(tmp_path: Path) -> None:
    path = tmp_path / "home" / "fernet.key"
    context = multiprocessing.get_context("fork")
    ready, found = context.Barrier(6), context.Queue()
    children = [context.Process(target=_make_key, args=(str(path), ready, found)) for _ in range(6)]
    for child in children:
        child.start()
    keys = [found.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert len(set(keys)) == 1 and len(parse_keys(keys[0])) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["fernet.key"]  # no temporary file left behind
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotating_encrypts_every_secret_with_the_first_key_so_the_old_one_can_go(ready_cli: Cli) -> None:
    cli = ready_cli
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    cli.env["LEDGER_FERNET_KEY"] = old
    cli.ok("variables", "set", "api_token", "tok-SECRET-1")
    cli.ok("connections", "add", "warehouse", "--uri", "postgresql://etl:pw-SECRET@db:5432/dw?sslmode=require")
    cli.env["LEDGER_FERNET_KEY"] = f"{new},{old}"
    done = cli.ok("db", "rotate-fernet-key")
    assert done == ("re-encrypted 1 variable(s) and 1 connection(s) with the first key of LEDGER_FERNET_KEY; "
                    "the keys after it can now be removed\n")
    cli.env["LEDGER_FERNET_KEY"] = new
    assert cli.ok("variables", "get", "api_token") == "tok-SECRET-1\n"
    with sqlite3.connect(cli.home / "ledger.db") as db:
        (password, extra), = db.execute("SELECT password_encrypted, extra_encrypted FROM connection").fetchall()
    assert Fernet(new.encode()).decrypt(password.encode()) == b"pw-SECRET"
    assert Fernet(new.encode()).decrypt(extra.encode()) == b"sslmode=require"
    (event,) = [e for e in cli.json("events") if e["kind"] == "fernet_key_rotated"]
    assert event["details"] == {"variables": 1, "connections": 1}

    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()  # a key that decrypts none of them
    before = dump(cli)
    assert "cannot be decrypted" in cli.fails("db", "rotate-fernet-key").stderr
    assert dump(cli) == before


KEY_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("keyfile", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("cat", 'echo "key=$(cat $LEDGER_HOME/fernet.key)"')
"""


def test_a_try_that_prints_the_key_file_has_it_masked_in_its_log(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.ok("variables", "set", "greeting", "hello")
    key = (cli.home / "fernet.key").read_text().strip()
    cli.write_dag("keyfile.py", KEY_DAG)
    tested = cli.ok("tasks", "test", "keyfile", "cat")
    assert "key=***" in tested and key not in tested
