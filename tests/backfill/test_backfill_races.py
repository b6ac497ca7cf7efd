"""A backfill and a scheduler changing one timeline at the same moment, on PostgreSQL (READ COMMITTED).

Each test commits a competing run from a second connection at the exact moment the code under test
takes the DAG's timeline lock (`ledger.store.runs.lock_timeline`): what it read before taking the lock
is then stale. On SQLite this cannot happen (every write transaction is BEGIN IMMEDIATE).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from ledger import DAG, BashTask
from ledger.core.states import RunType
from ledger.core.timeline import ChainRun, chain_violations
from ledger.models import DagRun
from ledger.scheduler.loop.scheduling import create_due_runs
from ledger.services.sync import register_dag
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from tests.conftest import sessions_on

T0 = pendulum.datetime(2024, 3, 1, tz="UTC")
NOW = pendulum.datetime(2024, 3, 10, tz="UTC")

pytestmark = pytest.mark.postgres

DAG_FILE = """
import pendulum
from ledger import DAG, BashTask

with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True) as dag:
    BashTask("a", "true")
"""


def a_dag() -> DAG:
    with DAG("d", schedule="@daily", start_date=T0, end_date=T0.add(days=2), catchup=True) as dag:
        BashTask("a", "true")
    dag.fileloc = "/dags/d.py"
    return dag


@pytest.fixture
def pg(migrated_postgres_url: str) -> Iterator[Any]:
    engine, sessions = sessions_on(migrated_postgres_url)
    yield sessions
    engine.dispose()


def compete_at_lock(monkeypatch: pytest.MonkeyPatch, sessions: Any, run_type: RunType, day: int) -> list[int]:
    """On the first lock_timeline call, another connection splices a `run_type` run at 2024-03-<day> and
    commits; then the lock is taken. Returns (once called) the id of the competing run."""
    real = run_store.lock_timeline
    made: list[int] = []

    def lock(session: Session, dag_id: str) -> None:
        if not made:
            with sessions.begin() as other:
                real(other, dag_id)
                spec = dag_store.current_spec(other, dag_id)
                interval = spec.schedule.interval_for(T0.add(days=day - 1))
                made.append(run_store.splice(other, spec, run_store.NewRun(interval, run_type), now=NOW,
                                             actor="competitor", lock=False).id)
        real(session, dag_id)

    monkeypatch.setattr(run_store, "lock_timeline", lock)
    return made


def live_runs(session: Session) -> list[DagRun]:
    return list(session.scalars(select(DagRun).where(DagRun.state != "overridden").order_by(DagRun.logical_date)))


def assert_chain(session: Session) -> None:
    runs = session.scalars(select(DagRun)).all()
    assert chain_violations([ChainRun(r.id, r.logical_date, r.previous_run_id, r.state != "overridden",
                                      r.overridden_by) for r in runs]) == []


def test_the_scheduler_skips_a_date_a_backfill_committed_while_it_waited_for_the_lock(
        pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pg.begin() as session:
        register_dag(session, a_dag(), now=T0, actor="t")
    made = compete_at_lock(monkeypatch, pg, RunType.BACKFILL, 2)
    with pg.begin() as session:
        create_due_runs(session, now=NOW, actor="scheduler")
    assert made
    with pg.begin() as session:
        runs = {r.logical_date.day: r for r in live_runs(session)}
        # whether 03-01 is created depends on when the fix reads the resume point; 03-02 stays the backfill's
        assert runs[2].id == made[0] and runs[2].run_type == "backfill"
        assert runs[3].run_type == "scheduled"
        assert_chain(session)


@pytest.fixture
def pg_cli_env(migrated_postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """In-process `ledger` commands on PostgreSQL, with the DAG of DAG_FILE registered."""
    from ledger.cli.app import app

    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "d.py").write_text(DAG_FILE)
    for key in ("LEDGER_DAGS_FOLDER", "LEDGER_DATABASE_URL", "LEDGER_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LEDGER_HOME", str(home))
    monkeypatch.setenv("LEDGER_DATABASE_URL", migrated_postgres_url)
    engine, sessions = sessions_on(migrated_postgres_url)
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=False)

    assert invoke("dags", "list").exit_code == 0
    yield invoke, sessions
    engine.dispose()


def test_a_backfill_skips_a_date_the_scheduler_committed_while_it_waited_for_the_lock(
        pg_cli_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    invoke, sessions = pg_cli_env
    made = compete_at_lock(monkeypatch, sessions, RunType.SCHEDULED, 2)
    result = invoke("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--submit", "--yes", "--json")
    assert made, "the timeline lock was never taken"
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [p["action"] for p in out["plan"]] == ["new", "skip", "new"]
    with sessions.begin() as session:
        runs = live_runs(session)
        assert [(r.logical_date.day, r.run_type) for r in runs] == [
            (1, "backfill"), (2, "scheduled"), (3, "backfill")]
        assert_chain(session)
