"""Do reads block the scheduler? Task lag of a busy `ledger scheduler` with and without a reader beside it.

    python -m benchmarks.read_beside_scheduler --existing 100000 --runs 100 --repeat 3

Each round is a fresh LEDGER_HOME (SQLite, WAL) holding a DAG `big` whose timeline has `--existing` runs
(inserted in bulk, as backfill_bench does) and the DAG of scheduler_throughput (`--runs` due runs of five
chained no-op PythonTasks). Then `ledger scheduler --exit-when-idle --parallelism 2` runs it, either

  alone        nothing else touches the database, or
  with_reader  a second process runs `ledger timeline big --json` (the whole 100,000-run chain as JSON)
               again and again, from before the scheduler starts until it exits;
  niced_reader the same reader at `nice -n 19`: on a 2-core machine the reader also takes a core from the
               scheduler and its workers, and this mode tells that CPU competition from waiting on the
               database (a reader that blocked writes would still raise the lag here).

Rounds alternate alone / with_reader so that the machine's load hits both sides alike. Reported per mode
(median of the repeats, min and max): ti_per_s and task lag p50 / p90 (downstream try start - upstream try
end, per run and edge, as in scheduler_throughput), and for the reader the number of whole timelines it
read while the scheduler ran and the median seconds per read. Issue 13's target: with the reader, lag p90
under 50 ms. Every round checks that every run succeeded and every task instance ran exactly once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._common import db_upgrade, ledger_command, ledger_env, load_average, percentile, run_sampled, summarise
from benchmarks.backfill_bench import seed_timeline
from benchmarks.backfill_bench import write_dag as write_big_dag
from benchmarks.scheduler_throughput import TASKS, check_and_measure
from benchmarks.scheduler_throughput import write_dag as write_throughput_dag


class Reader(threading.Thread):
    """Runs `ledger timeline big --json` back to back until stopped; keeps each read's duration."""

    def __init__(self, home: Path, existing: int, nice: bool) -> None:
        super().__init__(daemon=True)
        self.home, self.existing = home, existing
        self.prefix = ["nice", "-n", "19"] if nice else []
        self.stop = threading.Event()
        self.seconds: list[float] = []
        self.error: str | None = None

    def run(self) -> None:
        try:
            self.read_until_stopped()
        except Exception as exc:  # reported by the round, which must not wait for a dead reader
            self.error = repr(exc)

    def read_until_stopped(self) -> None:
        while not self.stop.is_set():
            began = time.perf_counter()
            done = subprocess.run([*self.prefix, *ledger_command(), "timeline", "big", "--json"],
                                  env=ledger_env(self.home), capture_output=True, text=True, check=False)
            if done.returncode != 0:
                self.error = done.stderr.strip()[-500:]
                return
            shown = len(json.loads(done.stdout))  # one document per run
            if shown < self.existing:
                self.error = f"the timeline showed {shown} runs, expected at least {self.existing}"
                return
            self.seconds.append(time.perf_counter() - began)


def one_round(workdir: Path, mode: str, existing: int, runs: int, parallelism: int) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True)
    write_big_dag(home, "big", "@hourly", 2000)
    db_upgrade(home)
    seed_timeline(home, existing)
    write_throughput_dag(home / "dags", runs, datetime.now(UTC))
    reader = Reader(home, existing, nice=mode == "niced_reader") if mode != "alone" else None
    if reader is not None:
        reader.start()
        while not reader.seconds and reader.error is None:  # the reader is warm and reading when we start
            time.sleep(0.05)
    load = load_average()
    cmd = [*ledger_command(), "scheduler", "--exit-when-idle", "--parallelism", str(parallelism),
           "--executor", "local"]
    with (workdir / "scheduler.out").open("wb") as log:
        reads_before = len(reader.seconds) if reader is not None else 0
        proc = run_sampled(cmd, env=ledger_env(home), stdout=log, interval=0.05, timeout=600)
    reads = (len(reader.seconds) - reads_before) if reader is not None else 0
    if reader is not None:
        reader.stop.set()
        reader.join(timeout=120)
        if reader.error:
            raise SystemExit(f"the reader failed: {reader.error}")
    if proc["returncode"] != 0:
        tail = (workdir / "scheduler.out").read_text(errors="replace")[-2000:]
        raise SystemExit(f"`ledger scheduler` exited with {proc['returncode']}:\n{tail}")
    measured = check_and_measure(home / "ledger.db", runs)
    lags = measured["lags_ms"]
    return {"ti_per_s": runs * len(TASKS) / proc["seconds"], "lag_p50_ms": percentile(lags, 50),
            "lag_p90_ms": percentile(lags, 90), "lag_max_ms": max(lags), "reads_during": reads,
            "read_s": statistics.median(reader.seconds) if reader is not None and reader.seconds else 0.0,
            "load_before": load}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--existing", type=int, default=100_000, help="runs in the timeline the reader reads")
    parser.add_argument("--runs", type=int, default=100, help="due runs of the scheduler's DAG (5 tasks each)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per mode (alternating)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--each", action="store_true", help="also print one JSON line per round")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.existing < 1:
        parser.error("--runs and --existing must be at least 1")
    rounds: dict[str, list[dict[str, Any]]] = {"alone": [], "with_reader": [], "niced_reader": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        for i in range(args.repeat):
            for mode in rounds:
                result = one_round(Path(tmp) / f"{mode}{i}", mode, args.existing, args.runs, args.parallelism)
                rounds[mode].append(result)
                if args.each:
                    print(json.dumps({"benchmark": "read_beside_scheduler_round", "mode": mode, "round": i,
                                      **{k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}}),
                          flush=True)
    for mode, results in rounds.items():
        out: dict[str, Any] = {"benchmark": "read_beside_scheduler", "mode": mode, "existing": args.existing,
                               "runs": args.runs, "repeat": args.repeat}
        for key, digits in (("ti_per_s", 1), ("lag_p50_ms", 2), ("lag_p90_ms", 2)):
            out.update(summarise(results, key, digits))
        out["lag_max_ms"] = round(max(r["lag_max_ms"] for r in results), 2)
        if mode != "alone":
            out["reads_during"] = [r["reads_during"] for r in results]
            out["read_s"] = round(statistics.median(r["read_s"] for r in results), 3)
            out["target_lag_p90_ms"] = 50
        out["load_before"] = [r["load_before"] for r in results]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
