"""Benchmark the latency from a producer's dataset event to its consumer run's first try, on SQLite.

    python -m benchmarks.dataset_latency --events 30 --repeat 3

For each repeat: a fresh LEDGER_HOME, `ledger db upgrade`, two DAGs: `bench_producer` (schedule None) with
`keeper` (START on `bench.open`, then sleeps, keeping the run open) and `make` (a no-op PythonTask, START on
`bench.go`, `outlets=[Dataset("bench://made")]`), and `bench_consumer`, scheduled on that dataset, with one no-op
task. The real `ledger scheduler --parallelism 4` runs as a subprocess. The benchmark sends `bench.open`, waits
for `keeper` to run, then `--events` times: sleeps a random 50 to 250 ms (so the scheduler is asleep, as it would
be), sends `bench.go`, and waits until the consumer run made by that try's event has a try that started and
ended. Per event, two latencies: from the producer try's recorded end (`task_try.ended_at`, the worker's report)
and from the dataset event's timestamp (`dataset_event.created_at`, the transaction that recorded it), to the
consumer's first try's `started_at`.

Reported: p50 and p90 of both, in ms (median over repeats, with min and max). Target: p50 within the task-state
signal latency (benchmarks/signal_latency.py: tens of ms on SQLite).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks._common import ledger_command, ledger_env, load_average, percentile, stop, summarise, utc, wait_for

DAG = '''
import time
import pendulum
from ledger import DAG, Dataset, PythonTask

MADE = Dataset("bench://made")


def keep(context):
    time.sleep(3600)


def make(context):
    pass


def use(context):
    pass


with DAG("bench_producer", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("keeper", keep, signals={"bench.open": "START"})
    PythonTask("make", make, signals={"bench.go": "START"}, outlets=[MADE])

with DAG("bench_consumer", schedule=[MADE], start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("use", use)
'''

# --others N: N more DAGs, half scheduled on datasets nobody writes, half hourly (nothing due between hours)
OTHERS = '''
import pendulum
from ledger import DAG, Dataset, PythonTask


def noop(context):
    pass


for i in range({n}):
    schedule = [Dataset(f"bench://other{{i}}")] if i % 2 == 0 else "@hourly"
    with DAG(f"other_{{i}}", schedule=schedule, catchup=False, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
        PythonTask("t", noop)
'''

# per producer try of `make`: its end, its event's time, and the consumer's first try's start and end
ROUND_TRIP = """
SELECT pt.ended_at, e.created_at, ct.started_at, ct.ended_at
FROM task_try pt
JOIN task_instance pti ON pti.id = pt.task_instance_id AND pti.task_id = 'make'
JOIN dataset_event e ON e.run_id = pti.run_id AND e.task_id = 'make' AND e.try_number = pt.try_number
JOIN dataset_consumed c ON c.event_id = e.id
JOIN task_instance cti ON cti.run_id = c.run_id AND cti.task_id = 'use'
JOIN task_try ct ON ct.task_instance_id = cti.id AND ct.try_number = 1
WHERE pt.try_number = :n
"""


def _ms(later: Any, earlier: Any) -> float:
    return (utc(later) - utc(earlier)).total_seconds() * 1000.0


def one_round(workdir: Path, events: int, others: int = 0) -> dict[str, Any]:
    from ledger.services.signal_service import SignalService
    from ledger.store.db import make_engine, make_sessions

    home = workdir / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "bench_datasets.py").write_text(DAG)
    if others:
        (home / "dags" / "bench_others.py").write_text(OTHERS.format(n=others))
    env = ledger_env(home)
    done = subprocess.run([*ledger_command(), "db", "upgrade"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ledger db upgrade failed: {done.stderr.strip()}")
    subprocess.run([*ledger_command(), "dags", "list"], env=env, capture_output=True, check=True)
    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    service = SignalService(engine, make_sessions(engine), home)
    log = (workdir / "scheduler.out").open("wb")
    proc = subprocess.Popen([*ledger_command(), "scheduler", "--parallelism", "4"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)

    def query(sql: str, **params: Any) -> Any:
        with engine.connect() as conn:
            return conn.execute(text(sql), params).first()

    def wait(what: Any) -> Any:
        return wait_for(what, workdir / "scheduler.out")

    from_end: list[float] = []
    from_event: list[float] = []
    try:
        service.send("bench.open", "1", sender="benchmark")
        wait(lambda: query("SELECT tt.started_at FROM task_try tt JOIN task_instance ti ON ti.id = "
                           "tt.task_instance_id WHERE ti.task_id = 'keeper'"))
        rng = random.Random(7)
        for n in range(1, events + 1):
            time.sleep(rng.uniform(0.05, 0.25))
            service.send("bench.go", str(n), sender="benchmark")
            row = wait(lambda n=n: (lambda r: r if r is not None and r[3] is not None else None)(
                query(ROUND_TRIP, n=n)))
            ended, event_at, started, _consumer_ended = row
            from_end.append(_ms(started, ended))
            from_event.append(_ms(started, event_at))
    finally:
        stop(proc)
        log.close()
        engine.dispose()
    return {"p50_ms": percentile(from_end, 50), "p90_ms": percentile(from_end, 90), "max_ms": max(from_end),
            "from_event_p50_ms": percentile(from_event, 50), "from_event_p90_ms": percentile(from_event, 90)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--others", type=int, default=0, help="more DAGs: half on other datasets, half hourly")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeat < 1:
        parser.error("--events and --repeat must be at least 1")
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-datasets-") as tmp:
        rounds = [one_round(Path(tmp) / f"round-{i}", args.events, args.others) for i in range(args.repeat)]
    out: dict[str, Any] = {"benchmark": "dataset_latency", "backend": "sqlite", "events": args.events,
                           "others": args.others, "repeat": args.repeat, "load_before": load}
    for key in ("p50_ms", "p90_ms", "from_event_p50_ms", "from_event_p90_ms"):
        out.update(summarise(rounds, key, 2))
    out["max_ms"] = round(max(r["max_ms"] for r in rounds), 2)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
