"""Backfill benchmarks (issue 4):

  end_to_end : N daily dates x 5 chained no-op tasks backfilled with `ledger backfill --yes` (LocalExecutor,
               parallelism 2, SQLite), from command start to exit: task instances per second.
  splice     : planning and splicing 10,000 dates into a DAG whose timeline already holds 100,000 runs
               (in-process, one transaction, as `ledger backfill --submit` does it).
  timeline   : `ledger timeline DAG --json` over that timeline (110,000 runs), wall time of the command.

    python -m benchmarks.backfill_bench --dates 1000 --existing 100000 --splice 10000 --repeat 3
    python -m benchmarks.backfill_bench --dates 1000 --repeat 3 --skip-splice --env LEDGER_REUSE_WORKERS=true
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_command, ledger_env, summarise

NOOP_DAG = """
import pendulum
from ledger import DAG, PythonTask

def noop():
    pass

with DAG("{dag_id}", schedule="{schedule}", start_date=pendulum.datetime({y}, 1, 1, tz="UTC"), catchup=False,
         max_active_runs=1000):
    tasks = [PythonTask(f"t{{i}}", noop) for i in range(5)]
    for up, down in zip(tasks, tasks[1:]):
        up >> down
"""


def write_dag(home: Path, dag_id: str, schedule: str, year: int) -> None:
    (home / "dags").mkdir(parents=True, exist_ok=True)
    (home / "dags" / f"{dag_id}.py").write_text(textwrap.dedent(NOOP_DAG.format(dag_id=dag_id, schedule=schedule,
                                                                                y=year)))


def end_to_end(dates: int, extra_env: dict[str, str] | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        write_dag(home, "bf", "@daily", 2020)
        db_upgrade(home)
        start = datetime(2020, 1, 1)
        end = start + timedelta(days=dates - 1)
        env = ledger_env(home, LEDGER_PARALLELISM="2", LEDGER_MAX_HELD_RUNS="64", **(extra_env or {}))
        began = time.perf_counter()
        done = subprocess.run([*ledger_command(), "backfill", "bf", "--start", start.date().isoformat(), "--end",
                               end.date().isoformat(), "--yes", "--json"], env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"backfill failed: {done.stderr[-2000:]}")
        result = json.loads(done.stdout)
        assert result["runs"]["done"] == dates and result["tasks"].get("success") == dates * 5, result
        return {"seconds": seconds, "ti_per_second": dates * 5 / seconds}


def seed_timeline(home: Path, existing: int) -> None:
    """`existing` hourly runs at even hours, linked as one chain, inserted in bulk (no task instances)."""
    import sqlite3

    from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager
    from ledger.scheduler.parsing.dag_sync import sync_parsed
    from ledger.store import dags as dag_store
    from ledger.store.db import make_engine, make_sessions

    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    sessions = make_sessions(engine)
    with DagFileProcessorManager(home / "dags") as manager:
        results = manager.parse_all(timeout=60)
    sync_parsed(sessions, results, now=datetime.now(UTC), actor="bench")  # with the versions' code, as ledger does
    with sessions.begin() as session:
        version = dag_store.get(session, "big").current_version
    engine.dispose()
    t0 = datetime(2000, 1, 1)
    conn = sqlite3.connect(home / "ledger.db")
    def stored(value: datetime) -> str:  # the text form SQLAlchemy stores on SQLite
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")

    now = stored(datetime.now(UTC))
    rows = []
    for i in range(existing):
        at = t0 + timedelta(hours=2 * i)
        rows.append((i + 1, "big", stored(at), stored(at), stored(at + timedelta(hours=1)), "scheduled", "success",
                     i or None, version, "@hourly", now))
    conn.executemany("INSERT INTO dag_run (id, dag_id, logical_date, data_interval_start, data_interval_end, "
                     "run_type, state, previous_run_id, version_hash, schedule, created_at) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.commit()
    conn.close()


def splice_and_timeline(existing: int, splice: int) -> dict[str, float]:
    import pendulum

    from ledger.services.backfill_create import BackfillRequest, create_backfill, make_plan
    from ledger.store import dags as dag_store
    from ledger.store.db import make_engine, make_sessions

    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        write_dag(home, "big", "@hourly", 2000)
        db_upgrade(home)
        seed_timeline(home, existing)
        engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
        sessions = make_sessions(engine)
        # the odd hours in the middle of the timeline: every one is a splice into a gap
        first = pendulum.datetime(2000, 1, 1, tz="UTC").add(hours=existing - splice)
        request = BackfillRequest(dag_id="big", start=first, end=first.add(hours=2 * splice - 1), submit=True)
        began = time.perf_counter()
        with sessions.begin() as session:
            spec = dag_store.current_spec(session, "big")
            plan = make_plan(session, spec, request, now=pendulum.now("UTC"), stale_after=30)
            create_backfill(session, spec, request, plan, now=pendulum.now("UTC"), actor="bench", job_id=None)
        splice_seconds = time.perf_counter() - began
        new = sum(1 for p in plan if p.action.value == "new")
        engine.dispose()
        assert new == splice, (new, splice)
        began = time.perf_counter()
        done = subprocess.run([*ledger_command(), "timeline", "big", "--json"], env=ledger_env(home),
                              capture_output=True, text=True)
        timeline_seconds = time.perf_counter() - began
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(json.loads(done.stdout)) == existing + splice
        return {"splice_seconds": splice_seconds, "timeline_seconds": timeline_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dates", type=int, default=1000)
    parser.add_argument("--existing", type=int, default=100_000)
    parser.add_argument("--splice", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--env", action="append", default=[], metavar="LEDGER_X=VALUE",
                        help="extra environment for `ledger backfill`, e.g. LEDGER_REUSE_WORKERS=true (repeatable)")
    parser.add_argument("--skip-splice", action="store_true", help="only the end-to-end backfill")
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)
    e2e = [end_to_end(args.dates, extra_env) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "backfill_end_to_end", "dates": args.dates, "tasks_per_run": 5,
                      "parallelism": 2, "repeat": args.repeat, **summarise(e2e, "ti_per_second", 1),
                      **summarise(e2e, "seconds", 2), "target_ti_per_second": 500, "env": extra_env}),
          flush=True)
    if args.skip_splice:
        return
    big = [splice_and_timeline(args.existing, args.splice) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "backfill_splice", "existing_runs": args.existing, "spliced": args.splice,
                      "repeat": args.repeat, **summarise(big, "splice_seconds", 3), "target_seconds": 5}), flush=True)
    print(json.dumps({"benchmark": "timeline_json", "runs": args.existing + args.splice, "repeat": args.repeat,
                      **summarise(big, "timeline_seconds", 3), "target_seconds": 2}), flush=True)


if __name__ == "__main__":
    main()
