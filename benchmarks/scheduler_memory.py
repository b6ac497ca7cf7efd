"""Benchmark the scheduler's resident memory while it parses a large DAGs folder.

    python -m benchmarks.scheduler_memory --files 1000 --tasks 10 --repeat 3

For each repeat: a fresh LEDGER_HOME in a temporary folder, `ledger db upgrade`, N DAG files of M chained
BashTasks each (schedule None, so no run is created and the measure is parsing and bookkeeping, not task
execution; `--schedule future` uses a daily schedule starting in 2100 instead), then

    ledger scheduler --exit-when-idle            (or --num-runs K with --num-runs)

as a subprocess, sampled every 20 ms from /proc:
  main_rss_peak_mb      the scheduler process's VmHWM (the kernel's own peak RSS, so nothing is missed
                        between samples)                                   target <= 250 MB
  children_rss_peak_mb  the largest sum of VmRSS over all its descendants (DAG file processors, executor
                        workers) in one sample; child_rss_peak_mb is the largest single one;
                        children_pss_peak_mb the same sum in PSS (pages the forked processors still share
                        with the scheduler are split, not counted once per process)
  seconds               start to exit (the first parse of the whole folder dominates)
It then checks that every DAG was registered (`dag` rows == N) with no import error.
Prints one JSON line with the median (min, max) of the repeats.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from benchmarks._common import db_upgrade, ledger_command, ledger_env, load_average, run_sampled, summarise


def write_dags(folder: Path, files: int, tasks: int, schedule: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if schedule == "none":
        header = 'schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")'
    else:  # a schedule whose first interval is decades away: parsed and registered, never due
        header = 'schedule="@daily", start_date=pendulum.datetime(2100, 1, 1, tz="UTC"), catchup=False'
    for i in range(files):
        lines = [f"    t{j} = BashTask('t{j}', 'echo dag {i} task {j} {{{{ ds }}}}', retries={j % 3})"
                 for j in range(tasks)]
        chain = " >> ".join(f"t{j}" for j in range(tasks))
        source = textwrap.dedent(f"""\
            import pendulum
            from ledger import DAG, BashTask

            with DAG("mem_{i:05d}", {header}) as dag:
            """) + "\n".join(lines) + (f"\n    {chain}\n" if tasks > 1 else "\n")
        (folder / f"dag_{i:05d}.py").write_text(source)


def check(db: Path, files: int) -> None:
    conn = sqlite3.connect(db)
    try:
        dags = conn.execute("SELECT count(*) FROM dag WHERE dag_id LIKE 'mem_%'").fetchone()[0]
        errors = conn.execute("SELECT count(*) FROM import_error").fetchone()[0]
        runs = conn.execute("SELECT count(*) FROM dag_run").fetchone()[0]
    finally:
        conn.close()
    if dags != files or errors or runs:
        raise SystemExit(f"expected {files} DAGs, no import error and no run; found {dags} DAGs, "
                         f"{errors} import errors, {runs} runs")


def one_round(workdir: Path, dags_src: Path, files: int, num_runs: int | None, parsing_processes: int | None,
              timeout: float) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True)
    db_upgrade(home)
    (home / "dags").symlink_to(dags_src, target_is_directory=True)
    cmd = [*ledger_command(), "scheduler"]
    cmd += ["--num-runs", str(num_runs)] if num_runs else ["--exit-when-idle"]
    extra = {"LEDGER_PARSING_PROCESSES": str(parsing_processes)} if parsing_processes else {}
    load = load_average()
    with (workdir / "scheduler.out").open("wb") as log:
        seen = run_sampled(cmd, env=ledger_env(home, **extra), stdout=log, interval=0.02, timeout=timeout,
                           pss=True)
    if seen["returncode"] != 0:
        tail = (workdir / "scheduler.out").read_text(errors="replace")[-2000:]
        raise SystemExit(f"`ledger scheduler` exited with {seen['returncode']}:\n{tail}")
    check(home / "ledger.db", files)
    return {"main_rss_peak_mb": seen["main_hwm_mb"], "main_rss_sampled_max_mb": seen["main_rss_max_mb"],
            "children_rss_peak_mb": seen["children_rss_max_mb"], "child_rss_peak_mb": seen["child_rss_max_mb"],
            "children_pss_peak_mb": seen["children_pss_max_mb"],
            "children_max": seen["children_max"], "seconds": seen["seconds"], "main_cpu_s": seen["main_cpu_s"],
            "load_before": load}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--schedule", choices=["none", "future"], default="none")
    parser.add_argument("--num-runs", type=int, default=None,
                        help="run `ledger scheduler --num-runs K` instead of --exit-when-idle")
    parser.add_argument("--parsing-processes", type=int, default=None,
                        help="LEDGER_PARSING_PROCESSES for the scheduler (default: its own default)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--each", action="store_true", help="also print one JSON line per repeat")
    args = parser.parse_args(argv)

    rounds = []
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        dags = Path(tmp) / "dags"
        write_dags(dags, args.files, args.tasks, args.schedule)
        for i in range(args.repeat):
            rounds.append(one_round(Path(tmp) / f"round{i}", dags, args.files, args.num_runs,
                                    args.parsing_processes, args.timeout))
            if args.each:
                print(json.dumps({"benchmark": "scheduler_memory_round", "round": i,
                                  **{k: round(v, 3) if isinstance(v, float) else v for k, v in rounds[-1].items()}}),
                      flush=True)
    out: dict[str, Any] = {"benchmark": "scheduler_memory", "files": args.files, "tasks": args.tasks,
                           "schedule": args.schedule, "mode": f"--num-runs {args.num_runs}" if args.num_runs
                           else "--exit-when-idle", "repeat": args.repeat}
    for key in ("main_rss_peak_mb", "children_rss_peak_mb", "children_pss_peak_mb", "child_rss_peak_mb", "seconds"):
        out.update(summarise(rounds, key, 1 if key.endswith("_mb") else 3))
    out["target_main_rss_mb"] = 250
    out["met"] = out["main_rss_peak_mb_max"] <= 250
    out["load_before"] = [r["load_before"] for r in rounds]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
