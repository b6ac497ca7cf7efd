"""Benchmark the LocalExecutor alone (no scheduler, no database): the ceiling for scheduler throughput.

    python -m benchmarks.executor_throughput --tries 1000 --parallelism 2 --repeat 3 [--reuse-workers both]
        [--queue-ahead 1]

Writes one DAG file with a no-op PythonTask, starts a LocalExecutor, keeps every slot busy with tries of
that task (submitting a new one the moment a slot frees: drain, then wait on the executor's handles)
and measures tries per second from the first submit to the last "finished" event. This is what the
executor can do on this machine with this parallelism; `scheduler_throughput` can only approach it. The
workers start on demand (decision 0331): before the clock starts, one wave of `parallelism` tries at once
starts them all, and counts in `startup_s`.
Prints one JSON line per start method with the median (min, max) of the repeats.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.connection
import statistics
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._common import physical_baseline, summarise


def write_dag(folder: Path) -> Path:
    path = folder / "bench_executor.py"
    path.write_text(textwrap.dedent("""\
        import pendulum

        from ledger import DAG, PythonTask


        def noop():
            pass


        with DAG("bench_executor", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
            PythonTask("a", noop)
        """))
    return path


def work_item(fileloc: Path, logs: Path, ti: int) -> Any:
    from ledger.scheduler.executors.base import WorkItem

    now = datetime(2024, 1, 1, tzinfo=UTC)
    return WorkItem(ti_id=ti, run_id=1, dag_id="bench_executor", task_id="a", try_number=1, fileloc=str(fileloc),
                    logical_date=now, data_interval_start=now, data_interval_end=now, dag_version="x",
                    run_type="manual", log_path=str(logs / f"ti_{ti}.log"))


def start_every_worker(executor: Any, fileloc: Path, logs: Path) -> None:
    """One try per slot, all at once: each finds the workers before it busy, so each starts one."""
    wave = [work_item(fileloc, logs, -n) for n in range(1, executor.parallelism + 1)]
    for item in wave:
        executor.submit(item)
    left = {item.ti_id for item in wave}
    while left:
        left -= {ev.ti_id for ev in executor.drain() if ev.kind == "finished"}
        if left:
            multiprocessing.connection.wait(executor.wait_handles(), timeout=1.0)


def one_round(fileloc: Path, logs: Path, tries: int, parallelism: int, start_method: str,
              reuse: bool = False, ahead: int = 0) -> dict[str, float]:
    from ledger.scheduler.executors.local import LocalExecutor

    baseline = physical_baseline()  # before the workers start: the fork is the scheduler process's
    executor = LocalExecutor(parallelism, start_method=start_method, reuse_workers=reuse,  # type: ignore[arg-type]
                             queue_ahead=ahead)
    boot = time.perf_counter()
    executor.start()
    start_every_worker(executor, fileloc, logs)
    started_up = time.perf_counter() - boot
    submitted = finished = 0
    failed: list[str] = []
    lat: list[float] = []  # submit -> "started" (ms)
    sent_at: dict[int, float] = {}
    began = time.perf_counter()
    try:
        while finished < tries:
            while submitted < tries and executor.open_slots() > 0:
                ti = submitted + 1
                sent_at[ti] = time.time()
                executor.submit(work_item(fileloc, logs, ti))
                submitted += 1
            events = executor.drain()
            if not events:
                multiprocessing.connection.wait(executor.wait_handles(), timeout=1.0)
                continue
            for ev in events:
                if ev.kind == "started":
                    lat.append((ev.at - sent_at[ev.ti_id]) * 1000.0)
                else:
                    finished += 1
                    if ev.state != "success":
                        failed.append(f"{ev.ti_id}: {ev.state} {ev.reason}")
        seconds = time.perf_counter() - began
    finally:
        executor.end(5)
    if failed:
        raise SystemExit(f"no-op tries failed: {failed[:3]}")
    return {"tries_per_s": tries / seconds, "seconds": seconds, "startup_s": started_up,
            "submit_to_start_ms": statistics.median(lat), **baseline}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--start-method", choices=["exec", "fork", "both"], default="exec")
    parser.add_argument("--reuse-workers", choices=["no", "yes", "both"], default="both",
                        help="Python tries in a child forked per try (no), in the worker itself (yes), or both")
    parser.add_argument("--queue-ahead", type=int, default=0,
                        help="items each worker is sent beyond the try it runs (LEDGER_QUEUE_AHEAD)")
    args = parser.parse_args(argv)
    methods = ["exec", "fork"] if args.start_method == "both" else [args.start_method]
    reuses = {"no": [False], "yes": [True], "both": [False, True]}[args.reuse_workers]
    variants = [(method, reuse) for method in methods for reuse in reuses]
    rounds: dict[tuple[str, bool], list[dict[str, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        fileloc = write_dag(Path(tmp))
        for i in range(args.repeat):  # the variants take turns, so that the machine's load hits each alike
            for method, reuse in variants:
                logs = Path(tmp) / f"logs-{method}-{reuse}-{i}"
                logs.mkdir()
                rounds[(method, reuse)].append(one_round(fileloc, logs, args.tries, args.parallelism, method, reuse,
                                                         args.queue_ahead))
    for (method, reuse), done in rounds.items():
        out = {"benchmark": "executor_throughput", "start_method": method, "reuse_workers": reuse,
               "tries": args.tries, "parallelism": args.parallelism, "queue_ahead": args.queue_ahead,
               "repeat": args.repeat}
        for key, digits in (("tries_per_s", 1), ("submit_to_start_ms", 2), ("startup_s", 3), ("fork_exit_ms", 3),
                            ("sqlite_commit_us", 1)):
            out.update(summarise(done, key, digits))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
