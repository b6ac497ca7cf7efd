"""Variables and connections: stored encrypted, read from the environment first, never listed, masked in
the logs and rendered templates of the tries that read them."""

from __future__ import annotations

import sqlite3

from cryptography.fernet import Fernet

from tests.conftest import Cli

SECRET_DAG = """
import pendulum
from ledger import DAG, BashTask, PythonTask
from ledger.services.secrets import Variable, get_connection

def use(context):
    conn = get_connection("warehouse")
    print("connecting to", conn.host, conn.port, "as", conn.login, "with", conn.password)
    print("token", Variable.get("api_token"), "bucket", Variable.get("bucket"))

with DAG("sec", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("use", use)
    BashTask("templated", "echo {{ var.value.api_token }} {{ conn.warehouse.password }} {{ var.value.bucket }}")
"""


def test_secrets_are_encrypted_never_listed_and_masked_in_logs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "api_token", "tok-SECRET-123", "--description", "the API's token")
    cli.ok("variables", "set", "bucket", "s3://from-the-database")
    cli.ok("connections", "add", "warehouse", "--uri", "postgresql://etl:pa%40ss-SECRET@db.internal:5432/dw")
    stored = sqlite3.connect(cli.home / "ledger.db").execute(
        "SELECT value_encrypted FROM variable UNION ALL SELECT password_encrypted FROM connection").fetchall()
    assert stored and all("SECRET" not in row[0] and row[0].startswith("gAAAA") for row in stored)
    listed = cli.ok("variables", "list") + cli.ok("connections", "list") + cli.ok("connections", "get", "warehouse")
    assert "SECRET" not in listed and "***" in listed
    assert cli.ok("variables", "get", "api_token").strip() == "tok-SECRET-123"

    cli.write_dag("sec.py", SECRET_DAG)
    cli.ok("trigger", "sec")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_VAR_BUCKET="s3://from-the-environment")
    log = cli.ok("tasks", "logs", "sec", "1", "use")
    assert "connecting to db.internal 5432 as etl with ***" in log and "token ***" in log
    assert "bucket s3://from-the-environment" in log  # the environment comes first
    templated = cli.ok("tasks", "logs", "sec", "1", "templated")
    assert "SECRET" not in templated and "*** ***" in templated
    (rendered,) = cli.json("tasks", "rendered", "sec", "1", "templated")
    assert rendered["rendered"]["bash_command"] == "echo *** *** s3://from-the-environment"
    assert {t["state"] for t in cli.json("runs", "show", "1")["task_instances"]} == {"success"}


def test_a_wrong_key_or_a_bad_uri_is_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "v", "value")
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()  # rotated without keeping the old key
    assert "cannot be decrypted" in cli.fails("variables", "get", "v").stderr
    assert "is not a URI" in cli.fails("connections", "add", "c", "--uri", "nothing").stderr
    assert "no variable named 'nope'" in cli.fails("variables", "get", "nope").stderr


FAILING_DAG = """
import pendulum
from ledger import DAG, PythonTask
from ledger.services.secrets import Variable

def login(context):
    raise ValueError("login refused for token " + Variable.get("api_token"))

def page(context):
    print("paging with", Variable.get("api_token"))
    raise RuntimeError("pager refused " + Variable.get("api_token"))

with DAG("fails", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), on_failure_callback=page) as dag:
    PythonTask("login", login)
"""


def test_a_secret_in_a_failure_reason_is_masked_everywhere(ready_cli: Cli) -> None:
    """The reason a try failed is kept beside its log (the try's row, its event, the scheduler's log, the
    callback context) and a callback has a log of its own: a secret the code read is *** in all of them."""
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "api_token", "tok-SECRET-123")
    cli.write_dag("fails.py", FAILING_DAG)
    tested = cli.run("dags", "test", "fails")
    assert tested.exit_code == 1 and "login refused for token ***" in tested.stdout
    assert "SECRET" not in tested.output
    cli.ok("trigger", "fails")
    printed = cli.run("scheduler", "--exit-when-idle")
    assert "login refused for token ***" in printed.output and "SECRET" not in printed.output
    events = cli.ok("events", "--json")
    assert "login refused for token ***" in events and "SECRET" not in events
    (call,) = cli.json("callbacks")
    assert call["state"] == "error" and call["message"] == "RuntimeError: pager refused ***"
    logs = [p.read_text() for p in (cli.home / "logs").rglob("*.log")]
    assert any("paging with ***" in text for text in logs)
    assert not [text for text in logs if "SECRET" in text]
    assert b"SECRET" not in (cli.home / "ledger.db").read_bytes()


def test_a_refused_uri_does_not_echo_its_password(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    bad_port = cli.fails("connections", "add", "c", "--uri", "postgresql://etl:pw-SECRET@db:port/dw")
    assert bad_port.exit_code == 2  # a value of the wrong form: a usage error
    assert bad_port.stderr == ("Error: ledger connections add: connection 'c': the port of "
                               "'postgresql://etl:***@db:port/dw' is not a number (see `ledger connections add "
                               "--help`)\n")
    no_scheme = cli.fails("connections", "add", "c", "--uri", "//etl:pw-SECRET@db/dw")
    assert "is not a URI like" in no_scheme.stderr and "SECRET" not in no_scheme.stderr


ENV_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("envdump", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("dump", "echo key=$LEDGER_FERNET_KEY smtp=$LEDGER_SMTP_PASSWORD")
"""


def test_the_schedulers_own_secrets_are_masked_in_a_tries_log(ready_cli: Cli) -> None:
    """Tries get the scheduler's environment (they need LEDGER_FERNET_KEY to read variables): a task that prints
    it printed the Fernet key and the SMTP password in clear (Airflow masks its fernet_key likewise)."""
    cli = ready_cli
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.env["LEDGER_SMTP_PASSWORD"] = "smtp-SECRET"
    cli.write_dag("envdump.py", ENV_DAG)
    tested = cli.ok("tasks", "test", "envdump", "dump")
    assert "key=*** smtp=***" in tested and cli.env["LEDGER_FERNET_KEY"] not in tested and "SECRET" not in tested
    cli.ok("trigger", "envdump")
    cli.ok("scheduler", "--exit-when-idle")
    log = cli.ok("tasks", "logs", "envdump", "1", "dump")
    assert "key=*** smtp=***" in log
