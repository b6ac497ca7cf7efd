"""Several `ledger scheduler`s on one PostgreSQL database: one catch-up DAG, the whole fleet's throughput.

    python -m benchmarks.schedulers_postgres --runs 200 --schedulers 2 --rounds 4
    python -m benchmarks.schedulers_postgres --trees /tmp/a,/tmp/b --rounds 4     # two `git archive`d trees

Each round: a fresh database on a throwaway PostgreSQL server (tests/pgserver.py: initdb on 127.0.0.1, stopped at
the end), `ledger db upgrade`, scheduler_throughput's DAG (daily, catchup, --runs due runs x 5 chained no-op
PythonTasks, max_active_runs = --runs) and --schedulers `ledger scheduler --exit-when-idle --parallelism 2
--executor local` started together, all working the same DAG (the case where they contend most: the same runs to
claim, the same DAG's limits to count). Wall time from the first start to the last exit. The database is then
checked: every task instance success, one try each (a second start of a try would be a second row).

With --trees, each round runs each tree in turn (PYTHONPATH at it; the order alternates from round to round, so that
drift in the background load hits both alike). Prints one JSON line per round and one with each tree's median TI/s
and the per-round ratios of the second tree to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (tests.pgserver, run as a module or by path)
from benchmarks._common import ledger_command, ledger_env, load_average
from benchmarks.scheduler_throughput import write_dag


def one_round(server: Any, name: str, tree: str | None, runs: int, schedulers: int) -> dict[str, Any]:
    import sqlalchemy as sa

    url = server.create_database(name)
    home = Path(tempfile.mkdtemp(prefix="ledger-bench-pg-")) / "home"
    home.mkdir()
    extra = {"LEDGER_DATABASE_URL": url, **({"PYTHONPATH": tree} if tree else {})}
    if tree:
        os.environ["PYTHONPATH"] = tree  # (ledger_command picks the tree's entry point)
    env = ledger_env(home, **extra)
    subprocess.run([*ledger_command(), "db", "upgrade"], env=env, check=True, capture_output=True)
    write_dag(home / "dags", runs, datetime.now(UTC))
    load = load_average()
    began = time.monotonic()
    procs = [subprocess.Popen([*ledger_command(), "scheduler", "--exit-when-idle", "--parallelism", "2",
                               "--executor", "local"], env=env, stdout=subprocess.DEVNULL,
                              stderr=(home / f"scheduler-{i}.err").open("wb")) for i in range(schedulers)]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - began
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            done = conn.execute(sa.text("SELECT count(*) FROM task_instance WHERE state = 'success'")).scalar_one()
            tries = conn.execute(sa.text("SELECT count(*) FROM task_try")).scalar_one()
    finally:
        engine.dispose()
    if codes != [0] * schedulers or done != runs * 5 or tries != runs * 5:
        raise SystemExit(f"{name}: exit codes {codes}, {done} task instances success and {tries} tries of "
                         f"{runs * 5} (see {home}/scheduler-*.err)")
    return {"tree": tree, "wall_s": round(wall, 2), "ti_per_s": round(runs * 5 / wall, 1), "load_before": load}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="due runs of the DAG (x 5 tasks)")
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trees", help="comma-separated source trees to compare (default: this checkout)")
    args = parser.parse_args(argv)
    from tests.pgserver import PostgresServer, postgres_available

    reason = postgres_available()
    if reason is not None:
        raise SystemExit(f"no PostgreSQL server can be started here: {reason}")
    trees: list[str | None] = list(args.trees.split(",")) if args.trees else [None]
    found: dict[str, list[float]] = {str(t): [] for t in trees}
    server = PostgresServer().start()
    try:
        for r in range(args.rounds):
            for i, tree in enumerate(trees if r % 2 == 0 else list(reversed(trees))):
                out = one_round(server, f"bench_{r}_{i}", tree, args.runs, args.schedulers)
                found[str(tree)].append(out["ti_per_s"])
                print(json.dumps({"benchmark": "schedulers_postgres", "round": r, "runs": args.runs,
                                  "schedulers": args.schedulers, **out}), flush=True)
    finally:
        server.stop()
    summary: dict[str, Any] = {"benchmark": "schedulers_postgres", "runs": args.runs, "schedulers": args.schedulers,
                               "ti_per_s": {t: statistics.median(v) for t, v in found.items()}}
    if len(trees) == 2:
        first, second = (found[str(t)] for t in trees)
        summary["ratios"] = [round(b / a, 3) for a, b in zip(first, second, strict=True)]
        summary["ratio"] = round(statistics.median(summary["ratios"]), 3)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
