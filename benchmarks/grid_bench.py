"""The web grid (issue 32): GET /dags/DAG/grid of a DAG with 10,000 runs x 20 tasks, from a real `ledger webserver`
over HTTP (keep-alive): the first screen (the latest 25 runs, the HTML page rendered on the server), the first
request after start and the median of the next ones (target <= 300 ms), and an older page (`?before=RUN` from the
middle of the timeline).

The ledger is built in bulk, as a submitted backfill is (one transaction through the store: ledger/store/runs.py
inserts the runs and their task instances in batches), then its runs and task instances are marked finished (one
UPDATE each; about 1 in 50 task instances failed) so that the grid shows states, not one colour.

    python -m benchmarks.grid_bench --runs 10000 --tasks 20 --requests 20 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._common import db_upgrade, summarise
from benchmarks.web_bench import _get, served

WIDE_DAG = """
import pendulum
from ledger import DAG, PythonTask, TaskGroup

def noop():
    pass

with DAG("grid", schedule="@hourly", start_date=pendulum.datetime(2000, 1, 1, tz="UTC"), catchup=False,
         max_active_runs=100000):
    previous = None
    for g in range({groups}):
        with TaskGroup(f"g{{g}}"):
            tasks = [PythonTask(f"t{{i}}", noop) for i in range(5)]
        if previous is not None:
            previous >> tasks[0]
        for up, down in zip(tasks, tasks[1:]):
            up >> down
        previous = tasks[-1]
"""


def build(home: Path, runs: int, tasks: int, source: str = WIDE_DAG) -> float:
    """The DAG `grid` of `source` (tasks in groups of 5, chained), and `runs` hourly runs with their task instances,
    finished. Seconds it took."""
    import pendulum

    from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager
    from ledger.scheduler.parsing.dag_sync import sync_parsed
    from ledger.services.backfill_create import BackfillRequest, create_backfill, make_plan
    from ledger.store import dags as dag_store
    from ledger.store.db import make_engine, make_sessions

    began = time.perf_counter()
    (home / "dags").mkdir(parents=True, exist_ok=True)
    (home / "dags" / "grid.py").write_text(textwrap.dedent(source.format(groups=max(tasks // 5, 1))))
    db_upgrade(home)
    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    sessions = make_sessions(engine)
    with DagFileProcessorManager(home / "dags") as manager:
        results = manager.parse_all(timeout=60)
    sync_parsed(sessions, results, now=datetime.now(UTC), actor="bench")
    first = pendulum.datetime(2000, 1, 1, tz="UTC")
    request = BackfillRequest(dag_id="grid", start=first, end=first.add(hours=runs - 1), submit=True)
    with sessions.begin() as session:
        spec = dag_store.current_spec(session, "grid")
        plan = make_plan(session, spec, request, now=pendulum.now("UTC"), stale_after=30)
        create_backfill(session, spec, request, plan, now=pendulum.now("UTC"), actor="bench", job_id=None)
    engine.dispose()
    # the seed's runs and task instances as finished (benchmark data, as benchmarks.backfill_bench seeds its
    # timeline): one UPDATE each
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("UPDATE task_instance SET state = CASE WHEN id % 50 = 0 THEN 'failed' ELSE 'success' END, "
                 "try_number = 1")
    conn.execute("UPDATE dag_run SET state = CASE WHEN id IN (SELECT run_id FROM task_instance WHERE state = "
                 "'failed') THEN 'failed' ELSE 'success' END, lock_holder = NULL")
    conn.commit()
    count = conn.execute("SELECT count(*) FROM task_instance").fetchone()[0]
    conn.close()
    if count != runs * tasks:
        raise SystemExit(f"seeded {count} task instances, expected {runs * tasks}")
    return time.perf_counter() - began


def one_round(home: Path, runs: int, requests: int) -> dict[str, float]:
    with served(home) as conn:
        first = _get(conn, "/dags/grid/grid")
        pages = sorted(_get(conn, "/dags/grid/grid") for _ in range(requests))
        older = sorted(_get(conn, f"/dags/grid/grid?before={runs // 2}") for _ in range(requests))
    return {"first_ms": first, "page_ms": pages[len(pages) // 2], "older_page_ms": older[len(older) // 2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=20, help="a multiple of 5")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        seconds = build(home, args.runs, args.tasks)
        rounds = [one_round(home, args.runs, args.requests) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "web_grid", "runs": args.runs, "tasks": args.tasks, "repeat": args.repeat,
                      "build_s": round(seconds, 1), **summarise(rounds, "first_ms", 1),
                      **summarise(rounds, "page_ms", 1), **summarise(rounds, "older_page_ms", 1), "target_ms": 300}),
          flush=True)


if __name__ == "__main__":
    main()
