"""What a try waits when it needs a LocalExecutor worker that is not started yet (decision 0331).

    python -m benchmarks.worker_start_lag --rounds 5

Each round starts a LocalExecutor of parallelism 2 (one worker), gives that worker a try that sleeps, then submits
a no-op try: it finds no idle worker and a second one is started for it. Measured: from that submit to the try's
"started" event (its `at`, the worker's clock), in ms. With every worker started in advance (before decision 0331)
this was the time a try takes to reach an idle worker. Prints the rounds, their median and the load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.connection
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import load_average
from ledger.scheduler.executors.local import LocalExecutor
from tests.scheduler.test_task_runner import work_item, write_dag_file


def one_round(folder: Path) -> float:
    dag_file = write_dag_file(folder)
    executor = LocalExecutor(2)
    executor.start()
    try:
        executor.submit(work_item(dag_file, "sleepy", ti_id=1))  # the first worker is busy from now on
        while not any(event.kind == "started" for event in executor.drain()):
            multiprocessing.connection.wait(executor.wait_handles(), timeout=1.0)
        sent = time.time()
        executor.submit(work_item(dag_file, "noop", ti_id=2))
        while True:
            for event in executor.drain():
                if event.ti_id == 2 and event.kind == "started":
                    return (event.at - sent) * 1000.0
            multiprocessing.connection.wait(executor.wait_handles(), timeout=1.0)
    finally:
        executor.end(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    load = load_average()
    lags = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
            lags.append(one_round(Path(tmp)))
    print(json.dumps({"benchmark": "worker_start_lag", "lag_ms": [round(x, 1) for x in lags],
                      "lag_ms_median": round(statistics.median(lags), 1), "load": load}), flush=True)


if __name__ == "__main__":
    main()
