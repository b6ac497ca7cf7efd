"""Benchmark DAG file processing: the first pass over a folder and an unchanged re-scan.

    python -m benchmarks.parse_dags --files 1000 --tasks 10 --repeat 3

Generates N DAG files of M BashTasks each in a temporary folder, then for each repeat:
  parse_first_pass       parse_all() with a fresh pool + sync_results() into a fresh migrated SQLite
                         database, committed (targets: <= 10 s for 1000 files x 10 tasks on 2 cores);
  parse_unchanged_rescan one poll() that re-lists and re-hashes every file and finds nothing due
                         (min_file_process_interval is large, so nothing is re-imported; target <= 1 s).
Prints one JSON line per benchmark with the median of the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

import pendulum
from alembic import command

from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager
from ledger.scheduler.parsing.dag_sync import sync_results
from ledger.store.db import alembic_config, make_engine, make_sessions


def write_dags(folder: Path, files: int, tasks: int) -> None:
    for i in range(files):
        lines = [f"    t{j} = BashTask('t{j}', 'echo dag {i} task {j} {{{{ ds }}}}', retries={j % 3})"
                 for j in range(tasks)]
        chain = " >> ".join(f"t{j}" for j in range(tasks))
        source = textwrap.dedent(f"""\
            import pendulum
            from ledger import DAG, BashTask

            with DAG("bench_{i:05d}", schedule="{i % 60} * * * *",
                     start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
            """) + "\n".join(lines) + (f"\n    {chain}\n" if tasks > 1 else "\n")
        (folder / f"dag_{i:05d}.py").write_text(source)


def one_round(folder: Path, workdir: Path, processes: int) -> dict[str, float]:
    url = f"sqlite:///{workdir / 'ledger.db'}"
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    sessions = make_sessions(engine)
    manager = DagFileProcessorManager(folder, parsing_processes=processes, min_file_process_interval=1e9,
                                      dag_dir_list_interval=0, file_timeout=60)
    try:
        started = time.perf_counter()
        results = manager.parse_all()
        parsed = time.perf_counter()
        with sessions.begin() as session:
            report = sync_results(session, results, now=pendulum.now("UTC"), actor="benchmark")
        synced = time.perf_counter()
        failed = [r.error for r in results if r.error]
        if failed or len(report.new_versions) != len(results):
            raise SystemExit(f"benchmark DAGs did not parse cleanly: {failed[:3]}")

        rescan_started = time.perf_counter()
        again = manager.poll()
        rescan = time.perf_counter() - rescan_started
        if again or manager.processing:
            raise SystemExit(f"the unchanged re-scan re-imported files: {len(again)} results")
    finally:
        manager.stop()
        engine.dispose()
    return {"first_pass": synced - started, "parse": parsed - started, "sync": synced - parsed,
            "rescan": rescan}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2, help="parsing processes")
    args = parser.parse_args(argv)

    rounds = []
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        folder = Path(tmp) / "dags"
        folder.mkdir()
        write_dags(folder, args.files, args.tasks)
        for i in range(args.repeat):
            workdir = Path(tmp) / f"round{i}"
            workdir.mkdir()
            rounds.append(one_round(folder, workdir, args.processes))

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 4)

    common = {"files": args.files, "tasks": args.tasks, "processes": args.processes, "repeat": args.repeat}
    print(json.dumps({"benchmark": "parse_first_pass", **common, "seconds": median("first_pass"),
                      "parse_seconds": median("parse"), "sync_seconds": median("sync")}))
    print(json.dumps({"benchmark": "parse_unchanged_rescan", **common, "seconds": median("rescan")}))


if __name__ == "__main__":
    main()
