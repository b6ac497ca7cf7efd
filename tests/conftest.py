from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
import pytest
from alembic import command
from sqlalchemy.orm import Session

from ledger.clock import FixedClock
from ledger.db import alembic_config, make_engine, make_sessions
from tests.pgserver import postgres_server, postgres_url  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
LEDGER = str(Path(sys.executable).with_name("ledger"))


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(pendulum.datetime(2024, 3, 10, 12, tz="UTC"))


def migrated_sessions(url: str) -> Any:
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    return engine, make_sessions(engine)


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[Any]:
    """A sessionmaker on a real SQLite file whose schema comes from the migrations."""
    engine, factory = migrated_sessions(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield factory
    engine.dispose()


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


@dataclass
class Cli:
    """Drives the real `ledger` console script in a subprocess on a temporary LEDGER_HOME."""

    home: Path
    env: dict[str, str]

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    def run(self, *args: str, input: str | None = None, timeout: float = 300, **env: str) -> Result:
        """`timeout`: generous, for loaded CI machines; a command normally takes well under a second."""
        proc = subprocess.run([LEDGER, *args], capture_output=True, text=True, env={**self.env, **env},
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(home), COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO))
    return Cli(home=home, env=env)


@pytest.fixture
def ready_cli(cli: Cli) -> Cli:
    """A Cli whose database has been created."""
    cli.ok("db", "upgrade")
    return cli


DAILY_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("daily", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=True) as dag:
    a = BashTask("a", "echo a")
    b = BashTask("b", "echo b")
    a >> b
"""
