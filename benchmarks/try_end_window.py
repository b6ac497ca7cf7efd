"""Where the time between the end of a try's code and the exit of its process goes (issue 40, decision 0253).

    python -m benchmarks.try_end_window --tries 40

Forks --tries tries (scheduler/runtime/try_process.py: fork_try, as every executor does) of a Python task that
writes the time its code ends to a file, then raises (as the fleet soak's `t3` does: the slowest end, a traceback
to print). For each: from the code's end to the report left for the worker (the report's `at`; none before decision
0253) and to the process's exit (the parent woken by its pidfd). Prints the medians, p90 and max in ms, with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ledger.scheduler.runtime import try_process
from tests.scheduler.test_task_runner import work_item

DAG = '''
import time
import pendulum
from ledger import DAG, PythonTask

ENDS = @ENDS@


def fails(context):
    with open(ENDS, "a") as f:
        f.write(repr(time.time()) + "\\n")
    raise RuntimeError("the code of this try fails")


with DAG("demo", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("fails", fails)
'''


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.try_end_window", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=40)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ledger-try-end-"))
    ends = root / "ends"
    dag_file = root / "demo.py"
    dag_file.write_text(DAG.replace("@ENDS@", repr(str(ends))))
    load = os.getloadavg()[0]
    to_report: list[float] = []
    to_exit: list[float] = []
    for n in range(args.tries):
        ends.unlink(missing_ok=True)
        running = try_process.fork_try(work_item(dag_file, "fails", ti_id=n + 1, try_number=n + 1))
        outcome = running.wait()
        exited = time.time()  # (woken by the pidfd the moment it exited)
        assert outcome is not None
        ended = float(ends.read_text().split()[0])
        to_exit.append((exited - ended) * 1000)
        report = getattr(running, "report", None)
        if report is not None:
            to_report.append((report.at - ended) * 1000)

    def summary(values: list[float]) -> dict[str, float] | None:
        return {"p50": round(statistics.median(values), 2), "p90": round(_percentile(values, 0.9), 2),
                "max": round(max(values), 2)} if values else None

    print(json.dumps({"tries": args.tries, "load_before": load, "load_after": os.getloadavg()[0],
                      "code_end_to_report_ms": summary(to_report), "code_end_to_exit_ms": summary(to_exit)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
