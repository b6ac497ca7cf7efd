from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
import pytest
from alembic import command
from hypothesis import HealthCheck, settings
from sqlalchemy.orm import Session

from ledger.infra.clock import FixedClock
from ledger.store.db import alembic_config, make_engine, make_sessions
from tests import jvm_archive, launcher
from tests.pgserver import PostgresServer, postgres_server, postgres_url  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parent.parent
# every job the tests run, in process or as a command, checks its memory of held runs against the database after
# each loop (scheduler/loop/memory.py); the tests that count a loop's statements turn it off for themselves
os.environ["LEDGER_VERIFY_MEMORY"] = "1"
# the JVMs the tests start through spark-submit (each Spark session a try or a worker opens, the Spark Connect server,
# Airflow's SparkSubmitOperator; the launcher's JVM before each) compile with C1 alone and collect with the serial
# collector (decision 0339), and map Spark's classes from this machine's class-data archive once it is made
# (tests/jvm_archive.py, decision 0347): a session that runs a few small jobs takes about a third less CPU with the
# first, about half with both; a value set by whoever runs the suite is kept
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JVM_ARCHIVES = jvm_archive.folder()
JVM_VARIABLES = {variable: job for variable, job in (("SPARK_SUBMIT_OPTS", "submit"),
                                                     ("SPARK_LAUNCHER_OPTS", "launcher"))
                 if variable not in os.environ}  # (not set by whoever runs the suite)


def _jvm_options() -> bool:
    """Sets the JVMs' options; whether they name the archives."""
    for variable, job in JVM_VARIABLES.items():
        os.environ[variable] = jvm_archive.options(JVM_OPTIONS, job, JVM_ARCHIVES)
    return jvm_archive.ready(JVM_ARCHIVES)


_JVM_ARCHIVED = [_jvm_options()]
LEDGER = launcher.LEDGER
# Hypothesis's defaults time each example (a 200 ms deadline) and fail a test whose inputs come slowly: both are the
# machine's load, not the rule under test. The property tests run without either; a test may still set its own.
settings.register_profile("ledger", deadline=None, suppress_health_check=[HealthCheck.too_slow])
# `make test-quick` loads this one (`--hypothesis-profile=quick`): each property test runs a fifth of its examples
# (`examples`); `make test`, CI's run, runs them all.
settings.register_profile("quick", parent=settings.get_profile("ledger"), max_examples=20)
settings.load_profile("ledger")


def examples(full: int) -> int:
    """A property test's `max_examples`: `full` under the suite's profile, a fifth of it (at least 5) under the quick
    one. Hypothesis's profile is loaded before the test modules are imported, so the decorator sees it."""
    return max(5, full * settings.default.max_examples // 100)


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ is exactly `env` inside the block, and what it was again after it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _import_cli_as_a_command_would() -> None:
    """The CLI's rich consoles take their width and colours from the environment when `cli` is first imported:
    import it here, before any test does, in the environment every command gets (_clean_env), so that commands
    run in this process (IN_PROCESS) print as the `ledger` console script does."""
    with _environment(_clean_env(REPO)):
        import ledger.cli.app  # noqa: F401


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))


def sessions_on(url: str) -> Any:
    """An engine on `url` and a sessionmaker on it."""
    engine = make_engine(url)
    return engine, make_sessions(engine)


def migrated_sessions(url: str) -> Any:
    """`sessions_on` after the migrations ran on `url` in this process (tests of a database the test creates
    itself; a fresh migrated database is `migrated_sqlite` copied, or `migrated_postgres_url`)."""
    command.upgrade(alembic_config(url), "head")
    return sessions_on(url)


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(home), COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO), LEDGER_VERIFY_MEMORY="1")
    return env


_import_cli_as_a_command_would()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file the real `ledger db upgrade` brought to the newest migration, once per test session (per
    xdist worker). Fixtures that need a migrated database copy it instead of running the migrations again
    (a `ledger db upgrade` costs a second or more of CPU); the tests of `db upgrade` and of the migrations
    themselves still start from an empty database."""
    home = tmp_path_factory.mktemp("migrated") / "home"
    home.mkdir()
    done = subprocess.run([LEDGER, "db", "upgrade"], capture_output=True, text=True, env=_clean_env(home),
                          cwd=home, timeout=300)
    assert done.returncode == 0 and "upgraded" in done.stdout, done.stdout + done.stderr
    template = home / "ledger.db"
    # the last connection closed checkpoints the WAL into the file: the file alone is the whole database
    leftovers = sorted(p.name for p in home.iterdir() if p != template)
    assert leftovers == [], f"db upgrade left {leftovers} beside the database"
    return template


@pytest.fixture(scope="session")
def postgres_template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of a PostgreSQL database the real `ledger db upgrade` brought to the newest migration, once per
    test session (per xdist worker): the PostgreSQL counterpart of `migrated_sqlite`. Nothing stays connected
    to it, so that `CREATE DATABASE ... TEMPLATE` can copy it."""
    name = "ledger_template"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_database(name)
    home = tmp_path_factory.mktemp("pg-template")
    done = subprocess.run([LEDGER, "db", "upgrade"], capture_output=True, text=True, cwd=home, timeout=300,
                          env={**_clean_env(home), "LEDGER_DATABASE_URL": url})
    assert done.returncode == 0 and "upgraded" in done.stdout, done.stdout + done.stderr
    return name


@pytest.fixture
def migrated_postgres_url(request: pytest.FixtureRequest, postgres_template: str) -> Iterator[str]:
    """SQLAlchemy URL of a fresh PostgreSQL database at the newest migration (a copy of the session's template,
    ~0.1 s where the migrations take a second or more), dropped after the test."""
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"t_{uuid.uuid4().hex}"
    url = server.create_database(name, template=postgres_template)
    yield url
    with contextlib.suppress(Exception):  # the server goes away with the session anyway
        server.drop_database(name)


def copy_migrated(template: Path, target: Path) -> Path:
    """A fresh, migrated database at `target` (a copy of the session's template)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    assert not target.exists(), target
    shutil.copyfile(template, target)
    return target


@pytest.fixture
def sqlite_sessions(tmp_path: Path, migrated_sqlite: Path) -> Iterator[Any]:
    """A sessionmaker on a real SQLite file whose schema comes from the migrations."""
    engine, made = sessions_on(f"sqlite:///{copy_migrated(migrated_sqlite, tmp_path / 'ledger.db')}")
    yield made
    engine.dispose()


@pytest.fixture
def sessions(sqlite_sessions: Any) -> Any:
    """`sqlite_sessions`; tests/store/conftest.py makes it each engine's in turn for the store's tests."""
    return sqlite_sessions


@pytest.fixture
def session(sessions: Any) -> Iterator[Session]:
    with sessions.begin() as s:
        yield s


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


# commands whose whole work is reading and writing the database: no fork, no signal handler, no DAG file import
# (trigger and `tasks clear --on-latest-version` read the DAGs folder first, in forked DAG file processors)
IN_PROCESS = {"timeline", "events", "runs", "lineage", "signal", "variables", "connections", "callbacks", "pools",
              "tasks", "users"}


def _in_process(args: tuple[str, ...]) -> bool:
    if os.environ.get("LEDGER_TEST_CLI") == "subprocess" or not args or args[0] not in IN_PROCESS:
        return False
    return not (args[0] == "tasks" and (args[1:2] == ("test",) or "--on-latest-version" in args))


def _run_in_process(args: list[str], env: dict[str, str], input: str | None, cwd: Path) -> Result:
    """`ledger ARGS` through the console script's entry point, in this process, as a subprocess would see it:
    its environment and working directory, stdin from `input`; an uncaught exception is a traceback on stderr
    and exit status 1, as Python's."""
    import io
    import traceback

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    engines: set[Engine] = set()

    def opened(connection: Any) -> None:  # the command's engines: closed after it, as its process's end would
        engines.add(connection.engine)

    out, err = io.StringIO(), io.StringIO()
    saved_cwd, saved_stdin, saved_hook = os.getcwd(), sys.stdin, sys.excepthook
    event.listen(Engine, "engine_connect", opened)
    os.chdir(cwd)
    sys.stdin = io.StringIO(input or "")
    code = 0
    try:
        with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            from ledger.cli.app import run

            try:
                run(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    err.write(f"{exc.code}\n")
            except Exception:
                traceback.print_exc(file=err)
                code = 1
    finally:
        event.remove(Engine, "engine_connect", opened)
        for engine in engines:
            engine.dispose()
        os.chdir(saved_cwd)
        sys.stdin, sys.excepthook = saved_stdin, saved_hook
    return Result(code, out.getvalue(), err.getvalue())


@dataclass
class Cli:
    """Drives the real `ledger` CLI on a temporary LEDGER_HOME: the console script in a subprocess, or its entry
    point in this process for database-only commands (run)."""

    home: Path
    env: dict[str, str]

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    def run(self, *args: str, input: str | None = None, timeout: float = 300, **env: str) -> Result:
        """`timeout`: generous, for loaded CI machines; a command normally takes well under a second.

        Commands that only read and write the database (IN_PROCESS) run the real CLI entry point in this
        process (`ledger.cli.app.run`, with the command's environment, working directory, stdin, stdout and stderr),
        which saves the ~0.8 s of CPU a `ledger` process spends importing; the rest (scheduler, backfill,
        db, dags: they fork, install signal handlers or import DAG files) and any command given an
        environment of its own run the `ledger` console script in a subprocess. LEDGER_TEST_CLI=subprocess
        runs every command in a subprocess."""
        if not env and _in_process(args):
            return _run_in_process(list(args), self.env, input, self.home)
        proc = launcher.run([LEDGER, *args], capture_output=True, text=True, env={**self.env, **env},
                            input=input, timeout=timeout, cwd=self.home)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **env: str) -> str:
        result = self.run(*args, **env)
        assert result.exit_code == 0, f"ledger {' '.join(args)} failed ({result.exit_code}):\n{result.output}"
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, *args: str) -> Result:
        """Runs a command that must be refused: one line on stderr, non-zero exit, no traceback."""
        result = self.run(*args)
        assert result.exit_code != 0, f"ledger {' '.join(args)} unexpectedly succeeded:\n{result.output}"
        assert "Traceback" not in result.output, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
        return result

    def write_dag(self, name: str, source: str) -> Path:
        self.dags.mkdir(parents=True, exist_ok=True)
        path = self.dags / name
        path.write_text(textwrap.dedent(source))
        return path


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    return Cli(home=home, env=_clean_env(home))


@pytest.fixture
def ready_cli(cli: Cli, migrated_sqlite: Path) -> Cli:
    """A Cli whose database has been created: a copy of the one `ledger db upgrade` made for the session."""
    copy_migrated(migrated_sqlite, cli.home / "ledger.db")
    return cli


@pytest.fixture
def smtp_server() -> Iterator[tuple[int, list[Any]]]:
    """A local SMTP server (aiosmtpd): (its port, the envelopes it received)."""
    from aiosmtpd.controller import Controller

    received: list[Any] = []

    class Handler:
        async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
            received.append(envelope)
            return "250 OK"

    with socket.socket() as probe:  # a free port (the controller cannot be given port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, received
    finally:
        controller.stop()


DAILY_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("daily", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=True) as dag:
    a = BashTask("a", "echo a")
    b = BashTask("b", "echo b")
    a >> b
"""


# -- the order tests are handed to xdist workers ---------------------------------------------------------------
# `make test` runs `pytest -n 2 --dist loadscope --no-loadscope-reorder`: xdist's loadscope scheduler hands out a
# module's tests together, as one unit, and gives a worker the next unit when it has two tests or fewer left; the
# units go out in the order below (`--no-loadscope-reorder`: not by their number of tests). A module's own fixtures
# (`scope="module"`: a Redis server and its worker, Chromium, a ledger built by a real scheduler run, the wheel) are
# then built once, not on each worker that runs one of its tests (decision 0337); what a session builds still is.
# The modules that held the tests that took longest in a whole run (`--durations=40`, quiet host) come first,
# longest first, so that a long one is never handed out near the end, where the other worker would idle while it
# runs (decision 0333); then the other long tests (real Spark, the docs' scenarios, Chromium, PostgreSQL restarts:
# marked slow, spark or browser), the scenarios through the real `ledger` command, and the quick in-process tests
# last. A module goes where its first test in this order puts it.
LONGEST_FIRST = (  # node id prefixes, by their longest test (s, quiet host, before decision 0333)
    "tests/airflow_compare/test_airflow_examples.py",  # 70, 21, 15: the example DAGs' own sleeps
    "tests/spark/test_example_pipeline.py",  # 68: `make demo`
    "tests/test_docs.py",  # 41, 22, 14, 12, 12: the guides
    "tests/test_wheel.py",  # 38 set-up, 20
    "tests/scheduler/test_celery_executor.py",  # 52 (a worker killed mid-try), 13, 11, 10
    "tests/chaos/test_fleet_faults.py",  # 27, 23
    "tests/scheduler/test_fleet_faults_seen.py",  # 23
    "tests/spark/test_spark_pinned.py",  # 22
    "tests/spark/test_spark_task.py",  # 18, 15, 10, 10, 10
    "tests/airflow/test_spark_provider.py",  # 17
    "tests/signals/test_signal_delivery.py::test_a_storm_of_ten_thousand_signals",  # 17 (PostgreSQL)
    "tests/test_readme_tour.py",  # 15
    "tests/web/test_daily_walk.py",  # 15
    "tests/web/test_browser.py",  # 14
    "tests/scheduler/test_database_faults.py",  # 12
    "tests/store/test_migrations.py",  # 12
    "tests/web/test_views_browser.py",  # 10
)


def _weight(item: pytest.Item) -> tuple[int, int]:
    known = next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)),
                 len(LONGEST_FIRST))
    if any(item.get_closest_marker(m) for m in ("spark", "slow", "browser")) or item.path.name == "test_docs.py":
        return known, 0
    if item.get_closest_marker("postgres") or item.get_closest_marker("scenario"):
        return known, 1
    return known, 2


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[pytest.CollectReport]:
    """Importing a test module makes pytest rewrite its asserts, most of what collection costs; pytest keeps the
    rewritten module (in the module's __pycache__) only where bytecode may be written. PYTHONDONTWRITEBYTECODE,
    set on the machines here, stays for everything else: while a test module is imported this process may write
    bytecode, so a second worker and every later run read the rewritten module instead of rewriting it."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


# A test that takes one of these fixtures (itself or through another) drives real processes: the real `ledger`
# command (`cli`), a Redis server and Celery workers, a web ledger built by a real scheduler run, a moto S3 server.
# It is a scenario, which `make test-quick` leaves out. A module whose own fixtures start processes says
# `pytest.mark.scenario` itself.
SCENARIO_FIXTURES = {"cli", "redis_server", "cluster", "celery_demo", "ledger_home", "ops_template", "ops_home",
                     "views_home", "datasets_home", "s3_endpoint", "s3_server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if uses & SCENARIO_FIXTURES:
            item.add_marker(pytest.mark.scenario)
        if "postgres_server" in uses:  # a real PostgreSQL server, whichever fixture starts it
            item.add_marker(pytest.mark.postgres)
    items.sort(key=_weight)  # stable: collection order within each weight


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not _JVM_ARCHIVED[0] and jvm_archive.ready(JVM_ARCHIVES):  # made meanwhile: the next JVMs map them
        _JVM_ARCHIVED[0] = _jvm_options()


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run that will start a JVM makes the machine's class-data archives in the background if they are missing."""
    if any(item.get_closest_marker("spark") for item in session.items):
        jvm_archive.start(JVM_ARCHIVES, JVM_OPTIONS)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
def each_db_cli(request: pytest.FixtureRequest, cli: Cli) -> Cli:
    """A Cli whose database has been created: the SQLite file in LEDGER_HOME (a copy of the session's migrated
    one, as `ready_cli`), then (marked postgres) a fresh PostgreSQL database copied from the session's migrated
    template (`migrated_postgres_url`) that every command of the scenario uses through LEDGER_DATABASE_URL."""
    if request.param == "postgres":
        cli.env["LEDGER_DATABASE_URL"] = request.getfixturevalue("migrated_postgres_url")
    else:
        request.getfixturevalue("ready_cli")
    return cli
