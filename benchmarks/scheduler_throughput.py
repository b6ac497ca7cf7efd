"""Benchmark end-to-end scheduling throughput and task lag: the real `ledger scheduler` on SQLite.

    python -m benchmarks.scheduler_throughput --runs 200 --repeat 3

For each repeat: a fresh LEDGER_HOME in a temporary folder, `ledger db upgrade`, one DAG file with a
daily schedule, catchup=True, start_date/end_date such that exactly N intervals are due (N runs),
max_active_runs=N and 5 chained no-op PythonTasks (a >> b >> c >> d >> e); then

    ledger scheduler --exit-when-idle --parallelism 2        (LocalExecutor, SQLite)

as a subprocess. Wall time is measured from just before the subprocess is started to its exit (so it
includes interpreter start-up, the first parse of the DAGs folder and run creation, exactly what a user
waits for). The database is then checked: N runs, all success; N*5 task instances, all success with
try_number 1; exactly one task_try row per task instance, try_number 1, success.

Reported (median of the repeats, plus min and max):
  ti_per_s        N*5 / wall seconds                (issue 13: >= 500, aim 1000; Airflow 2.10: ~1)
  lag_p50_ms      per run and per edge: downstream task_try.started_at - upstream task_try.ended_at
  lag_p90_ms                                        (issue 13: p50 <= 5 ms, p90 <= 15 ms; Airflow 2.10: ~11 s)
  sched_cpu_ms_per_ti  the scheduler process's CPU time / (N*5)  (issue 13: <= 1 ms)
  sched_tree_cpu_ms_per_ti  the same with the processes it started for itself (the LocalExecutor's workers, the
                  DAG file processors), each one's own CPU without the tries it forked (issue 30: the
                  CeleryExecutor's at most the LocalExecutor's; decision 192)
and, to tell fixed cost from steady state: startup_s (scheduler start to the first try's start) and
exec_ti_per_s (N*5 / (last try's end - first try's start)); and the machine's physical baseline, measured
just before each repeat: fork_exit_ms (a warm interpreter forks a child that exits, and reaps it) and
sqlite_commit_us (one small SQLite transaction, WAL, synchronous=NORMAL).
Prints one JSON line with the medians (`--each` also prints one line per repeat). `--statements` adds
statements_per_ti: the SQL statements the scheduler process ran per task instance (benchmarks/statement_count).

    python -m benchmarks.scheduler_throughput --executor celery --runs 100 --repeat 1

runs each repeat twice: with the LocalExecutor, then with the CeleryExecutor and two local `ledger worker`
processes (redis-server on a free loopback port, the webserver for the workers' code; each worker runs
`--parallelism` tries at once), and prints one line per executor.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import (
    db_upgrade,
    ledger_command,
    ledger_env,
    load_average,
    percentile,
    physical_baseline,
    run_sampled,
    summarise,
)

TASKS = ["a", "b", "c", "d", "e"]
STATEMENT_COUNT = Path(__file__).resolve().parent / "statement_count"  # its sitecustomize counts (--statements)
EDGES = list(zip(TASKS, TASKS[1:], strict=False))
DAG_ID = "bench_throughput"


def write_dag(folder: Path, runs: int, now: datetime) -> datetime:
    """A daily DAG with exactly `runs` due intervals at `now`; returns its start_date.

    Intervals [d, d+1day) are due once they have ended: with start = (today 00:00 UTC) - runs days the
    due ones are start, start+1, ..., today-1day, i.e. `runs` of them; end_date pins the last one, so a
    run that crosses midnight does not get an extra interval.
    """
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - timedelta(days=runs)
    end = start + timedelta(days=runs - 1)
    chain = " >> ".join(TASKS)
    source = textwrap.dedent(f"""\
        import pendulum

        from ledger import DAG, PythonTask


        def noop():
            pass


        with DAG("{DAG_ID}", schedule="@daily",
                 start_date=pendulum.datetime({start.year}, {start.month}, {start.day}, tz="UTC"),
                 end_date=pendulum.datetime({end.year}, {end.month}, {end.day}, tz="UTC"),
                 catchup=True, max_active_runs={max(runs, 1)}, max_active_tasks={max(runs * len(TASKS), 16)}) as dag:
        """)
    source += "".join(f"    {t} = PythonTask({t!r}, noop)\n" for t in TASKS)
    source += f"    {chain}\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_throughput.py").write_text(source)
    return start


def _ts(value: str | None) -> datetime:
    if value is None:
        raise SystemExit("a finished task try has no start or end time")
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_and_measure(db: Path, runs: int) -> dict[str, Any]:
    """Verify that every run succeeded and every task instance ran exactly once; compute lag and span."""
    conn = sqlite3.connect(db)
    try:
        run_states = dict(conn.execute("SELECT state, count(*) FROM dag_run WHERE dag_id = ? GROUP BY state",
                                       (DAG_ID,)).fetchall())
        if run_states != {"success": runs}:
            raise SystemExit(f"expected {runs} successful runs, found {run_states}")
        ti = conn.execute("SELECT count(*), sum(state = 'success'), sum(try_number = 1) FROM task_instance "
                          "WHERE dag_id = ?", (DAG_ID,)).fetchone()
        expected = runs * len(TASKS)
        if tuple(ti) != (expected, expected, expected):
            raise SystemExit(f"expected {expected} task instances, all success with try_number 1; "
                             f"found (count, success, try 1) = {tuple(ti)}")
        rows = conn.execute(
            "SELECT ti.run_id, ti.task_id, tt.try_number, tt.state, tt.started_at, tt.ended_at, ti.id "
            "FROM task_try tt JOIN task_instance ti ON ti.id = tt.task_instance_id WHERE ti.dag_id = ?",
            (DAG_ID,)).fetchall()
    finally:
        conn.close()
    if len(rows) != expected:
        raise SystemExit(f"expected {expected} task_try rows (one per task instance), found {len(rows)}")
    per_ti = {r[6] for r in rows}
    bad = [r for r in rows if r[2] != 1 or r[3] != "success"]
    if len(per_ti) != expected or bad:
        raise SystemExit(f"some task instances ran more than once or not successfully: {bad[:3]}")
    times: dict[tuple[int, str], tuple[datetime, datetime]] = {
        (r[0], r[1]): (_ts(r[4]), _ts(r[5])) for r in rows}
    lags = []
    for run_id in {r[0] for r in rows}:
        for up, down in EDGES:
            lags.append((times[(run_id, down)][0] - times[(run_id, up)][1]).total_seconds() * 1000.0)
    first_start = min(s for s, _ in times.values())
    last_end = max(e for _, e in times.values())
    return {"lags_ms": lags, "first_start": first_start, "last_end": last_end}


def one_round(workdir: Path, runs: int, parallelism: int, extra_env: dict[str, str],
              keep_output: bool, timeout: float | None = None, executor: str = "local",
              statements: bool = False) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True)
    db_upgrade(home)
    write_dag(home / "dags", runs, datetime.now(UTC))
    if executor == "celery":
        from benchmarks.celery_cluster import celery_cluster

        with celery_cluster(workdir, home, workers=2, concurrency=parallelism) as broker:
            return _scheduled(workdir, home, runs, parallelism, {**extra_env, **broker}, keep_output, timeout,
                              executor, parallelism=2 * parallelism, statements=statements)
    return _scheduled(workdir, home, runs, parallelism, extra_env, keep_output, timeout, executor,
                      statements=statements)


def _scheduled(workdir: Path, home: Path, runs: int, workers: int, extra_env: dict[str, str], keep_output: bool,
               timeout: float | None, executor: str, *, parallelism: int | None = None,
               statements: bool = False) -> dict[str, Any]:
    parallelism = parallelism or workers
    if statements:  # the scheduler counts its statements (benchmarks/statement_count/sitecustomize.py)
        counted = workdir / "statements"
        counted.mkdir()
        extra_env = {**extra_env, "BENCH_STATEMENTS_OUT": str(counted),
                     "PYTHONPATH": os.pathsep.join(p for p in (str(STATEMENT_COUNT), os.environ.get("PYTHONPATH"))
                                                   if p)}
    log = (workdir / "scheduler.out").open("wb")
    cmd = [*ledger_command(), "scheduler", "--exit-when-idle", "--parallelism", str(parallelism),
           "--executor", executor]
    load = load_average()
    baseline = physical_baseline()
    started_wall = datetime.now(UTC)
    proc = run_sampled(cmd, env=ledger_env(home, **extra_env), stdout=log, interval=0.05, timeout=timeout)
    seconds = proc["seconds"]
    log.close()
    if proc["returncode"] != 0:
        tail = (workdir / "scheduler.out").read_text(errors="replace")[-2000:]
        raise SystemExit(f"`ledger scheduler` exited with {proc['returncode']}:\n{tail}")
    measured = check_and_measure(home / "ledger.db", runs)
    lags = measured["lags_ms"]
    tis = runs * len(TASKS)
    span = (measured["last_end"] - measured["first_start"]).total_seconds()
    result = {
        "seconds": seconds,
        "ti_per_s": tis / seconds,
        "lag_p50_ms": percentile(lags, 50),
        "lag_p90_ms": percentile(lags, 90),
        "lag_max_ms": max(lags),
        "startup_s": (measured["first_start"] - started_wall).total_seconds(),
        "exec_seconds": span,
        "exec_ti_per_s": tis / span if span > 0 else float("inf"),
        "sched_cpu_s": proc["main_cpu_s"],
        "sched_cpu_ms_per_ti": proc["main_cpu_s"] * 1000.0 / tis,
        # with the processes the scheduler started for itself (the LocalExecutor's workers, DAG file processors),
        # without the tries they fork: what the scheduler costs its host per task instance
        "sched_tree_cpu_ms_per_ti": (proc["main_cpu_s"] + proc["children_own_cpu_s"]) * 1000.0 / tis,
        "total_cpu_s": proc["total_cpu_s"],
        # split of the rest: the scheduler's own processes (workers, DAG file processors) and what they forked
        # and reaped (the tries)
        "workers_cpu_ms_per_ti": proc["children_own_cpu_s"] * 1000.0 / tis,
        "tries_cpu_ms_per_ti": (proc["total_cpu_s"] - proc["main_cpu_s"] - proc["children_own_cpu_s"]) * 1000.0 / tis,
        "sched_rss_peak_mb": proc["main_hwm_mb"],
        "load_before": load,
        **baseline,
    }
    if statements:
        result["statements_per_ti"] = sum(int(f.read_text()) for f in counted.iterdir()) / tis
    if keep_output:
        result["home"] = str(home)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="due intervals, i.e. DAG runs (N)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--each", action="store_true", help="also print one JSON line per repeat")
    parser.add_argument("--keep", metavar="DIR", type=Path,
                        help="work in DIR and keep it (databases, logs, scheduler output) instead of a temp dir")
    parser.add_argument("--env", action="append", default=[], metavar="LEDGER_X=VALUE",
                        help="extra environment for the scheduler, e.g. LEDGER_POLL_INTERVAL=0.5 (repeatable)")
    parser.add_argument("--timeout", type=float, default=600.0, help="kill a scheduler still running after this")
    parser.add_argument("--executor", choices=("local", "celery"), default="local",
                        help="celery: each repeat runs the LocalExecutor and then the CeleryExecutor with two local "
                             "workers of --parallelism each")
    parser.add_argument("--statements", action="store_true",
                        help="count the SQL statements the scheduler process runs (statements_per_ti; counting "
                             "costs CPU, so its other numbers are not comparable with a run without it)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    extra_env = dict(item.split("=", 1) for item in args.env)

    executors = ["local", "celery"] if args.executor == "celery" else ["local"]
    by_executor: dict[str, list[dict[str, Any]]] = {name: [] for name in executors}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        base = args.keep or Path(tmp)
        for i in range(args.repeat):
            for name in executors:
                rounds = by_executor[name]
                rounds.append(one_round(base / f"round{i}-{name}", args.runs, args.parallelism, extra_env,
                                        keep_output=args.keep is not None, timeout=args.timeout, executor=name,
                                        statements=args.statements))
                if args.each:
                    print(json.dumps({"benchmark": "scheduler_throughput_round", "round": i, "executor": name,
                                      **{k: (round(v, 4) if isinstance(v, float) else v)
                                         for k, v in rounds[-1].items()}}), flush=True)
    for name, rounds in by_executor.items():
        report(args, name, rounds, extra_env)


def report(args: argparse.Namespace, executor: str, rounds: list[dict[str, Any]], extra_env: dict[str, str]) -> None:
    out: dict[str, Any] = {"benchmark": "scheduler_throughput", "executor": executor, "runs": args.runs,
                           "tasks_per_run": len(TASKS), "task_instances": args.runs * len(TASKS),
                           "parallelism": args.parallelism if executor == "local" else 2 * args.parallelism,
                           "repeat": args.repeat}
    for key, digits in (("ti_per_s", 1), ("lag_p50_ms", 2), ("lag_p90_ms", 2), ("seconds", 3),
                        ("startup_s", 3), ("exec_ti_per_s", 1), ("sched_cpu_ms_per_ti", 3),
                        ("sched_tree_cpu_ms_per_ti", 3), ("fork_exit_ms", 3), ("sqlite_commit_us", 1)):
        out.update(summarise(rounds, key, digits))
    if args.statements:
        out.update(summarise(rounds, "statements_per_ti", 2))
    out["sched_rss_peak_mb"] = round(max(r["sched_rss_peak_mb"] for r in rounds), 1)
    out["load_before"] = [r["load_before"] for r in rounds]
    out["lag_max_ms"] = round(max(r["lag_max_ms"] for r in rounds), 2)
    if extra_env:
        out["env"] = extra_env
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
