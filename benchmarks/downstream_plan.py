"""Planning a `--downstream` backfill (issue 33): a chain of 3 DAGs over 2 partitioned datasets, each with
`--partitions` live daily runs, and `ledger backfill ingest --start .. --end .. --reprocess completed
--downstream --dry-run --json` over every partition: the wall time of the command (target <= 5 s), which plans
the backfill's dates and every consumer DAG and date below it; and `plan_seconds`, the planning alone, in
process (what the command adds to starting and parsing the DAGs folder).

    python -m benchmarks.downstream_plan --partitions 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_command, ledger_env, summarise

CHAIN = """
import pendulum
from ledger import DAG, BashTask, Dataset, TimePartitions

RAW = Dataset("raw", partitions=TimePartitions("daily"))
CLEAN = Dataset("clean", partitions=TimePartitions("daily"))

with DAG("ingest", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"), catchup=False):
    BashTask("load", "true", outlets=[RAW])

with DAG("clean", schedule=[RAW]):
    BashTask("clean", "true", outlets=[CLEAN])

with DAG("report", schedule=[CLEAN]):
    BashTask("report", "true")
"""


def seed(home: Path, partitions: int) -> None:
    """`partitions` live successful runs of each DAG, one per day from 2020-01-01, inserted in bulk."""
    subprocess.run([*ledger_command(), "dags", "list"], env=ledger_env(home), capture_output=True, check=True)
    conn = sqlite3.connect(home / "ledger.db")
    versions = dict(conn.execute("SELECT dag_id, current_version FROM dag").fetchall())

    def stored(value: datetime) -> str:  # the text form SQLAlchemy stores on SQLite
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")

    now, t0 = stored(datetime.now(UTC)), datetime(2020, 1, 1)
    rows, next_id = [], 1
    for dag_id, run_type in (("ingest", "scheduled"), ("clean", "dataset_triggered"), ("report", "dataset_triggered")):
        for i in range(partitions):
            at = t0 + timedelta(days=i)
            rows.append((next_id, dag_id, stored(at), stored(at), stored(at + timedelta(days=1)), run_type, "success",
                         next_id - 1 if i else None, versions[dag_id], "@daily", now))
            next_id += 1
    conn.executemany("INSERT INTO dag_run (id, dag_id, logical_date, data_interval_start, data_interval_end, "
                     "run_type, state, previous_run_id, version_hash, schedule, created_at) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.commit()
    conn.close()


def once(partitions: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        (home / "dags").mkdir()
        (home / "dags" / "chain.py").write_text(CHAIN)
        db_upgrade(home)
        seed(home, partitions)
        last = date(2020, 1, 1) + timedelta(days=partitions - 1)
        began = time.perf_counter()
        done = subprocess.run([*ledger_command(), "backfill", "ingest", "--start", "2020-01-01", "--end",
                               last.isoformat(), "--reprocess", "completed", "--downstream", "--dry-run", "--json"],
                              env=ledger_env(home), capture_output=True, text=True)
        seconds = time.perf_counter() - began
        assert done.returncode == 0, done.stderr[-2000:]
        plan = json.loads(done.stdout)
        assert len(plan["plan"]) == partitions and len(plan["downstream"]) == 2 * partitions, len(plan["downstream"])
        assert all(p["action"] == "override" for p in plan["downstream"])
        return {"seconds": seconds, "plan_seconds": in_process(home, last)}


def in_process(home: Path, last: date) -> float:
    """The planning alone (no process start, no parsing of the DAGs folder): the backfill's dates, then every
    consumer DAG and date below it, in one reading transaction."""
    import pendulum

    from ledger.backfill.downstream import plan_downstream
    from ledger.core.backfill_plan import Reprocess
    from ledger.services.backfill_create import BackfillRequest, make_plan
    from ledger.store import dags as dag_store
    from ledger.store.db import make_engine, make_sessions

    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    sessions = make_sessions(engine)
    request = BackfillRequest(dag_id="ingest", start=pendulum.datetime(2020, 1, 1, tz="UTC"),
                              end=pendulum.datetime(last.year, last.month, last.day, 23, 59, tz="UTC"),
                              reprocess=Reprocess.COMPLETED, downstream=True)
    began = time.perf_counter()
    with sessions.begin() as session:
        spec = dag_store.current_spec(session, "ingest")
        below = plan_downstream(session, spec, make_plan(session, spec, request, now=pendulum.now("UTC"),
                                                         stale_after=30))
    seconds = time.perf_counter() - began
    engine.dispose()
    assert len(below) == 2 * (last - date(2020, 1, 1)).days + 2
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = [once(args.partitions) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "downstream_plan", "dags": 3, "partitions": args.partitions,
                      "repeat": args.repeat, **summarise(rounds, "seconds", 3), **summarise(rounds, "plan_seconds", 3),
                      "target_seconds": 5}), flush=True)


if __name__ == "__main__":
    main()
