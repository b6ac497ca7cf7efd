"""Web view benchmarks (issue 14), against a real `ledger webserver` process over HTTP (keep-alive):

  timeline_page : GET /dags/DAG, the first page (newest 100 runs) of a DAG whose timeline holds 100,000 runs
                  (the HTML page, rendered on the server); the first request after start, and the median.
  timeline_api  : GET /api/v1/dags/DAG/timeline?limit=100, the first page of the same timeline as JSON.
  run_api       : GET /api/v1/runs/RUN for runs spread over that timeline: p50 and p99.

    python -m benchmarks.web_bench --existing 100000 --requests 500 --repeat 3

With --graph, the dataset graph (issue 41) instead, on a DAG of `--tasks` tasks each writing its own hourly
partitioned dataset (an outlet, and a recorded write) in each of `--runs` runs, with a DAG scheduled on one of them and
a task reading it as an inlet (20 datasets of 10,000 partitions: 200,000 dataset events and 200,000 recorded writes):

  dataset_graph : GET /datasets, the graph of every dataset; the first request after start, and the median.
  dataset_page  : GET /datasets/DATASET of the dataset the DAG is scheduled on (its graph, its newest partitions'
                  writes, its consumers' partition matrix, its latest events): the median.

    python -m benchmarks.web_bench --graph --runs 10000 --tasks 20 --repeat 3

With --pages too, the other main pages of issue 41's target on the same ledger (PAGES: home, the grid, the
calendar, the timeline, the runs list, a run's page, the events): each route's first request and the median of 5.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_command, ledger_env, percentile, summarise
from benchmarks.backfill_bench import seed_timeline, write_dag


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(conn: http.client.HTTPConnection, path: str) -> float:
    """Milliseconds from sending the request to having read the whole body (status must be 200)."""
    began = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - began) * 1000
    if response.status != 200:
        raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
    return elapsed


def _wait_up(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # a start on a host loaded with other work can take tens of seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ledger webserver exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("ledger webserver did not start within 120 s")


@contextmanager
def served(home: Path) -> Iterator[http.client.HTTPConnection]:
    """A keep-alive connection to a `ledger webserver` just started on the ledger in `home`."""
    port = _free_port()
    proc = subprocess.Popen([*ledger_command(), "webserver", "--port", str(port)], env=ledger_env(home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(port, proc)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        yield conn
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def one_round(home: Path, existing: int, requests: int) -> dict[str, float]:
    with served(home) as conn:
        first_page = _get(conn, "/dags/big")
        pages = [_get(conn, "/dags/big") for _ in range(20)]
        api_pages = [_get(conn, "/api/v1/dags/big/timeline?limit=100") for _ in range(20)]
        rng = random.Random(14)
        runs = [_get(conn, f"/api/v1/runs/{rng.randint(1, existing)}") for _ in range(requests)]
    pages.sort()
    return {"first_page_ms": first_page, "page_ms": pages[len(pages) // 2],
            "api_page_ms": sorted(api_pages)[len(api_pages) // 2],
            "run_p50_ms": percentile(runs, 50), "run_p99_ms": percentile(runs, 99)}


DATASET_DAG = """
import pendulum
from ledger import DAG, BashTask, Dataset, PythonTask, TaskGroup, TimePartitions

HOURLY = TimePartitions("hourly", timezone="UTC")

def noop():
    pass

with DAG("grid", schedule="@hourly", start_date=pendulum.datetime(2000, 1, 1, tz="UTC"), catchup=False,
         max_active_runs=100000):
    previous = None
    for g in range({groups}):
        with TaskGroup(f"g{{g}}"):
            tasks = [PythonTask(f"t{{i}}", noop, outlets=[Dataset(f"d_g{{g}}.t{{i}}", partitions=HOURLY)])
                     for i in range(5)]
        if previous is not None:
            previous >> tasks[0]
        for up, down in zip(tasks, tasks[1:]):
            up >> down
        previous = tasks[-1]

with DAG("consumer", schedule=[Dataset("d_g0.t0", partitions=HOURLY)]):
    BashTask("report", "true")

with DAG("reader", schedule=None, start_date=pendulum.datetime(2000, 1, 1, tz="UTC")):
    BashTask("check", "true", inlets=[Dataset("d_g0.t0", partitions=HOURLY)])
"""


def seed_writes(home: Path) -> int:
    """A dataset event and a recorded write of each task instance's dataset (d_TASK), of its run's hour, inserted
    past the store (two INSERT ... SELECT), then the datasets' tallies counted from them once; how many."""
    from ledger.store import dataset_tally
    from ledger.store.db import make_engine, make_sessions

    conn = sqlite3.connect(home / "ledger.db")
    hour = "strftime('%Y-%m-%dT%H', r.logical_date)"
    conn.execute(f"INSERT INTO dataset_event (dataset, partition, run_id, dag_id, task_id, try_number, downstream, "
                 f"created_at) SELECT 'd_' || ti.task_id, {hour}, r.id, r.dag_id, ti.task_id, 1, 0, r.logical_date "
                 f"FROM task_instance ti JOIN dag_run r ON r.id = ti.run_id ORDER BY r.id, ti.id")
    conn.execute(f"INSERT INTO lineage_write (dataset, partition, run_id, dag_id, task_id, try_number, dag_version, "
                 f"try_state, rows, written_at, recorded_at) SELECT 'd_' || ti.task_id, {hour}, r.id, r.dag_id, "
                 f"ti.task_id, 1, r.version_hash, 'success', 10, r.logical_date, r.logical_date "
                 f"FROM task_instance ti JOIN dag_run r ON r.id = ti.run_id ORDER BY r.id, ti.id")
    conn.commit()
    count = int(conn.execute("SELECT count(*) FROM lineage_write").fetchone()[0])
    conn.close()
    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    with make_sessions(engine).begin() as session:
        dataset_tally.recount(session)
    engine.dispose()
    return count


# the other main pages of issue 41's target, on the same ledger (with --pages): name -> path
PAGES = {"home": "/", "grid": "/dags/grid/grid", "calendar": "/dags/grid/calendar", "timeline": "/dags/grid",
         "runs": "/runs", "run": "/runs/5000", "events": "/events"}


def graph_round(home: Path, requests: int, pages: bool = False) -> dict[str, float]:
    with served(home) as conn:
        first = _get(conn, "/datasets")
        graphs = sorted(_get(conn, "/datasets") for _ in range(requests))
        dataset_pages = sorted(_get(conn, "/datasets/d_g0.t0") for _ in range(requests))
        found = {"first_ms": first, "graph_ms": graphs[len(graphs) // 2],
                 "dataset_page_ms": dataset_pages[len(dataset_pages) // 2]}
        for name, path in PAGES.items() if pages else ():
            found[f"{name}_first_ms"] = _get(conn, path)  # the route's first request (its statements compiled)
            later = sorted(_get(conn, path) for _ in range(5))
            found[f"{name}_ms"] = later[len(later) // 2]
    return found


def graph_main(args: argparse.Namespace) -> None:
    from benchmarks.grid_bench import build

    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        seconds = build(home, args.runs, args.tasks, DATASET_DAG)
        writes = seed_writes(home)
        rounds = [graph_round(home, args.requests, args.pages) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "web_dataset_graph", "runs": args.runs, "tasks": args.tasks, "writes": writes,
                      "repeat": args.repeat, "build_s": round(seconds, 1), **summarise(rounds, "first_ms", 1),
                      **summarise(rounds, "graph_ms", 1), **summarise(rounds, "dataset_page_ms", 1),
                      "target_ms": 300}), flush=True)
    if args.pages:
        print(json.dumps({"benchmark": "web_pages", "runs": args.runs, "tasks": args.tasks, "repeat": args.repeat,
                          **{k: v for name in PAGES for k, v in {**summarise(rounds, f"{name}_first_ms", 1),
                                                                 **summarise(rounds, f"{name}_ms", 1)}.items()},
                          "target_ms": 300}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--existing", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--graph", action="store_true", help="the dataset graph benchmark (--runs x --tasks)")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=20, help="a multiple of 5")
    parser.add_argument("--pages", action="store_true", help="with --graph: the other main pages too (PAGES)")
    args = parser.parse_args()
    if args.graph:
        args.requests = min(args.requests, 20)
        graph_main(args)
        return
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        write_dag(home, "big", "@hourly", 2000)
        db_upgrade(home)
        seed_timeline(home, args.existing)
        rounds = [one_round(home, args.existing, args.requests) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "web_timeline_page", "runs": args.existing, "page": 100, "repeat": args.repeat,
                      **summarise(rounds, "first_page_ms", 1), **summarise(rounds, "page_ms", 1),
                      **summarise(rounds, "api_page_ms", 1), "target_ms": 300}), flush=True)
    print(json.dumps({"benchmark": "web_run_api", "runs": args.existing, "requests": args.requests,
                      "repeat": args.repeat, **summarise(rounds, "run_p50_ms", 2), **summarise(rounds, "run_p99_ms", 2),
                      "target_p99_ms": 50}), flush=True)


if __name__ == "__main__":
    main()
