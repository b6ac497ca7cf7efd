"""The edges a new user hit (issue 28), through the real `ledger` command: a DAG file whose name is not UTF-8,
ids that cannot name a log folder, DAG files that print while they are imported, and the LEDGER_* environment
of a Python try."""

from __future__ import annotations

import json
import os

from tests.conftest import Cli

PRINTS_AND_READS_ITS_ENVIRONMENT = """
import os
import pendulum
from ledger import DAG, BashTask, PythonTask

print("hello while parsing")
print('{"not": "the listing"}')
os.write(1, b"fd 1 while parsing\\n")


def show():
    for key in ("LEDGER_DAG_ID", "LEDGER_TASK_ID", "LEDGER_RUN_ID", "LEDGER_TRY_NUMBER", "LEDGER_DAG_VERSION",
                "LEDGER_CODE_DIR"):
        print(f"{key}={os.environ[key]}")


with DAG("good", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("python", show) >> BashTask("bash", "echo LEDGER_RUN_ID=$LEDGER_RUN_ID")
"""

LONG_DAG_ID = """
import pendulum
from ledger import DAG, BashTask
with DAG("x" * 256, schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("a", "echo a")
"""

ESCAPING_TASK_ID = """
import pendulum
from ledger import DAG, BashTask
with DAG("escapes", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("../../outside", "echo a")
"""


def test_a_bad_file_name_bad_ids_and_printing_dag_files_leave_every_other_dag_working(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("good.py", PRINTS_AND_READS_ITS_ENVIRONMENT)
    cli.write_dag("long_id.py", LONG_DAG_ID)
    cli.write_dag("escaping.py", ESCAPING_TASK_ID)
    with open(os.path.join(os.fsencode(cli.dags), b"caf\xe9.py"), "wb") as f:
        f.write(b"raise SystemExit('never imported')\n")

    listed = cli.ok("dags", "list", "--json")
    assert [d["dag_id"] for d in json.loads(listed)] == ["good"]  # valid JSON: nothing the file printed
    errors = {e["file"].rsplit("/", 1)[-1]: e["error"] for e in cli.json("dags", "errors")}
    assert set(errors) == {"caf\\xe9.py", "long_id.py", "escaping.py"}
    assert all("\n" not in error for error in errors.values())
    assert errors["caf\\xe9.py"].endswith("caf\\xe9.py: the file name is not valid UTF-8, so ledger cannot "
                                          "record it; rename the file")
    assert str(cli.dags / "long_id.py") in errors["long_id.py"]
    assert "dag_id 'xxxx" in errors["long_id.py"] and "too long (256 characters)" in errors["long_id.py"]
    assert errors["escaping.py"].startswith(f"{cli.dags / 'escaping.py'}:")
    assert "DAG 'escapes': task_id '../../outside' may only contain letters, digits" in errors["escaping.py"]
    assert "hello while parsing" not in cli.run("dags", "errors").output

    cli.ok("trigger", "good", "--logical-date", "2024-03-05")
    scheduler = cli.run("scheduler", "--exit-when-idle")
    assert scheduler.exit_code == 0, scheduler.output
    assert "hello while parsing" not in scheduler.output and "Traceback" not in scheduler.output
    assert "fd 1 while parsing" not in scheduler.output  # nor what the workers' imports wrote to fd 1
    python_log = cli.ok("tasks", "logs", "good", "1", "python")
    for line in ("LEDGER_DAG_ID=good", "LEDGER_TASK_ID=python", "LEDGER_RUN_ID=1", "LEDGER_TRY_NUMBER=1"):
        assert line in python_log.splitlines(), python_log
    version = next(x for x in python_log.splitlines() if x.startswith("LEDGER_DAG_VERSION="))
    assert len(version.split("=", 1)[1]) == 64
    code_dir = next(x for x in python_log.splitlines() if x.startswith("LEDGER_CODE_DIR="))
    assert "/code/snapshots/" in code_dir
    bash_log = cli.ok("tasks", "logs", "good", "1", "bash")
    assert "LEDGER_RUN_ID=1" in bash_log.splitlines()
    assert "fd 1 while parsing" in python_log + bash_log  # the log of the try whose worker imported the file
    assert not (cli.home / "outside").exists()

    # what the DAG file printed is in the DAG processor log, under the file's name
    log = (cli.home / "logs" / "dag_processor.log").read_text()
    assert f"output while importing {cli.dags / 'good.py'}" in log
    assert "hello while parsing" in log.splitlines()
