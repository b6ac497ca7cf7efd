"""The web tests' ledgers, each built with the real `ledger` command once per test session (per xdist worker): one
that went through a real catch-up, a new version, a backfill and a manual override (read by the web tests), the
operators' ledger (`build_ops`, copied for each module that changes it), the views' and the datasets'."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests import launcher
from tests.conftest import LEDGER, REPO, Cli, _clean_env, copy_migrated

FAST = {"LEDGER_POLL_INTERVAL": "0.2", "LEDGER_HEARTBEAT_INTERVAL": "0.5"}
EVIL = "<script>alert('x')</script><img src=x onerror=alert(1)>"

WEB_DAG = """
import pendulum
from datetime import timedelta
from ledger import DAG, BashTask, PythonTask

def write(context):
    print("log line: EVIL")
    context.record_write("sales_clean", context.logical_date.date().isoformat(), rows=ROWS, path="/data/x")

with DAG("web", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True,
         default_args={"retry_delay": timedelta(0)}):
    flaky = BashTask("flaky", 'test "$LEDGER_TRY_NUMBER" -gt 1', retries=1)
    PythonTask("write", write) >> flaky
"""


def dag_source(rows: int) -> str:
    return WEB_DAG.replace("ROWS", str(rows)).replace("EVIL", EVIL.replace("'", "\\'"))


def cli_on(home: Path, template: Path | None, **extra: str) -> Cli:
    """The real CLI on a new ledger in `home`: its database a copy of `template` (the session's `migrated_sqlite`),
    or, given None, made by `ledger db upgrade` (on the database `extra` names)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(home), COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO), **FAST, **extra)
    cli = Cli(home=home, env=env)
    if template is None:
        cli.ok("db", "upgrade")
    else:
        copy_migrated(template, home / "ledger.db")
    return cli


def app_client(cli: Cli) -> Iterator[TestClient]:
    settings = load_settings({"LEDGER_HOME": str(cli.home)})
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def build(home: Path, template: Path | None, **extra: str) -> Cli:
    cli = cli_on(home, template, **extra)
    cli.write_dag("web.py", dag_source(10))
    cli.ok("scheduler", "--exit-when-idle")  # catch-up: 3 runs, each task `flaky` fails once, then succeeds
    cli.write_dag("web.py", dag_source(11))  # a new version
    cli.ok("backfill", "web", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed", "--yes")
    cli.ok("trigger", "web", "--logical-date", "2024-03-03", "--replace", "--conf", f'{{"note": "{EVIL}"}}')
    cli.ok("signal", "send", "web.ready", EVIL)
    return cli


def new_home(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    home = tmp_path_factory.mktemp(name) / "home"
    home.mkdir()
    return home


OPS_DAG = """
import pendulum
from ledger import DAG, BashTask
from ledger.sdk.params import Param

with DAG("ops", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 10, tz="UTC"), catchup=False,
         params={"who": Param("world", type="string"), "n": Param(1, type="integer")}):
    BashTask("a", "echo a") >> BashTask("b", "echo b")
"""
PASSWORD = "correct horse battery"


def build_ops(home: Path, template: Path) -> Cli:
    """A ledger with DAG `ops` (params who: string, n: integer) and two finished runs, users `op` (operator)
    and `vi` (viewer)."""
    home.mkdir()
    cli = Cli(home=home, env=_clean_env(home))
    copy_migrated(template, home / "ledger.db")
    cli.write_dag("ops.py", OPS_DAG)
    for day in ("2024-03-01", "2024-03-02"):
        cli.ok("trigger", "ops", "--logical-date", day)
    cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    assert cli.run("users", "create", "op", "--role", "operator", input=PASSWORD + "\n").exit_code == 0
    assert cli.run("users", "create", "vi", "--role", "viewer", input=PASSWORD + "\n").exit_code == 0
    return cli


@pytest.fixture(scope="session")
def ops_template(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Path:
    """The LEDGER_HOME of a ledger `build_ops` made, once per test session (per xdist worker). No test runs in it:
    each module that needs that ledger takes a copy of it (`copy_ops`) and changes only its own."""
    return build_ops(tmp_path_factory.mktemp("ops-template") / "home", migrated_sqlite).home


def copy_ops(template: Path, home: Path) -> Cli:
    """The ledger build_ops made, in a new `home`: a copy of `template` (its database, DAGs folder, logs and code
    cache; nothing has it open). Until a process of the copy parses its DAGs folder, the database names the
    template's DAG file as the DAG's file: the same bytes, which the template keeps for the whole session."""
    shutil.copytree(template, home)
    return Cli(home=home, env=_clean_env(home))


@pytest.fixture(scope="session")
def ops_home(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    """build_ops's ledger for the tests of task marks (runs 1 and 2) and of the admin pages (users, secrets,
    pools): they change different things, so they share one copy."""
    return copy_ops(ops_template, tmp_path_factory.mktemp("ops-shared") / "home")


@pytest.fixture(scope="session")
def ledger_home(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Cli:
    return build(new_home(tmp_path_factory, "web"), migrated_sqlite)


@pytest.fixture(scope="session")
def client(ledger_home: Cli) -> Iterator[TestClient]:
    yield from app_client(ledger_home)


# A DAG in Europe/Berlin with tags, a task group, a mapped task, a log in ANSI colours, a secret variable in a
# template and a secret in a passed value; a DAG file that fails to import; a slow DAG run only on demand.
VIEWS_DAG = """
import pendulum
from ledger import DAG, BashTask, PythonTask, TaskGroup

def extract(context):
    print("extracting")
    return {"token": "s3cr3t-value", "rows": 3}

with DAG("berlin", schedule="0 6 * * *", start_date=pendulum.datetime(2024, 3, 1, tz="Europe/Berlin"),
         end_date=pendulum.datetime(2024, 3, 3, tz="Europe/Berlin"), catchup=True, tags=["finance", "daily"]):
    colours = BashTask("colours", "printf '\\\\033[31mred alert\\\\033[0m plain "
                                  "\\\\033[1;32mbold green\\\\033[0m <b>x</b>\\\\n'; "
                                  "echo 'key {{ var.value.api_token }} on {{ ds }}'")
    with TaskGroup("load"):
        first = PythonTask("extract", extract)
        second = BashTask("copy", "echo copy")
        first >> second
    colours >> first
    fan = BashTask.partial(task_id="fan").expand(bash_command=["echo one", "echo two"])
    second >> fan

with DAG("slow", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("tick", "echo 'token {{ var.value.api_token }}'; "
                     "for i in $(seq 1 20); do echo \\"tick $i\\"; sleep 0.3; done")
"""


def build_views(home: Path, template: Path) -> Cli:
    cli = cli_on(home, template)
    cli.ok("variables", "set", "api_token", "s3cr3t-value")
    cli.write_dag("views.py", VIEWS_DAG)
    cli.write_dag("broken.py", "import pendulum\nraise RuntimeError('this DAG file is broken on purpose')\n")
    cli.ok("scheduler", "--exit-when-idle")  # catch-up: 2 runs of berlin
    cli.ok("backfill", "berlin", "--start", "2024-03-01", "--end", "2024-03-02", "--reprocess", "completed", "--yes")
    return cli


@pytest.fixture(scope="session")
def views_home(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Cli:
    return build_views(new_home(tmp_path_factory, "views"), migrated_sqlite)


@pytest.fixture(scope="session")
def views_client(views_home: Cli) -> Iterator[TestClient]:
    yield from app_client(views_home)


@contextmanager
def served(cli: Cli, *options: str, path: str = "/login", context: ssl.SSLContext | None = None) -> Iterator[str]:
    """A real `ledger webserver OPTIONS` on a free loopback port, until `path` answers 200 (up to 180 s: a loaded
    CI machine starts processes slowly); yields its base URL and stops it after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = launcher.popen([LEDGER, "webserver", "--port", str(port), *options], env=cli.env, cwd=cli.home,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"{'https' if context else 'http'}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + path, timeout=10, context=context) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the webserver did not answer within 180 s"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# Datasets (issue 41's dataset graph): a chain of DAGs over two daily partitioned datasets, each write of
# `sales_raw` also recorded as lineage, a DAG whose task reads it as an inlet and records a write of its own
DATASETS_DAG = """
import pendulum
from ledger import DAG, BashTask, PythonTask, Dataset, TimePartitions

RAW = Dataset("sales_raw", partitions=TimePartitions("daily", timezone="UTC"))
CLEAN = Dataset("sales_clean", partitions=TimePartitions("daily", timezone="UTC"))

def ingest(context):
    context.record_write("sales_raw", context.logical_date.date().isoformat(), rows=10)

def audit(context):
    context.record_write("audit_log", "all", rows=1)

with DAG("ingest", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True):
    PythonTask("load", ingest, outlets=[RAW])

with DAG("clean", schedule=[RAW]):
    BashTask("clean", "true", outlets=[CLEAN])

with DAG("report", schedule=CLEAN):
    BashTask("report", "true")

with DAG("audit", schedule="@once", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("check", audit, inlets=[RAW])
"""


@pytest.fixture(scope="session")
def datasets_home(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Cli:
    """DATASETS_DAG after the scheduler ran it to idle: 3 runs of each of ingest, clean and report, 1 of audit."""
    cli = cli_on(new_home(tmp_path_factory, "datasets"), migrated_sqlite)
    cli.write_dag("chain.py", DATASETS_DAG)
    cli.ok("scheduler", "--exit-when-idle")
    return cli
