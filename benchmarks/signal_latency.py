"""Benchmark the latency from sending a signal until the task it STARTs is running, on SQLite and PostgreSQL,
with the scheduler woken by signals (the default) and polling only (LEDGER_SIGNAL_WAKEUP=false).

    python -m benchmarks.signal_latency --sends 40 --repeat 3

For each backend and mode and repeat: a fresh LEDGER_HOME (and, for PostgreSQL, a fresh database on a
throwaway server started for the benchmark, as the test suite does), `ledger db upgrade`, one DAG with
schedule None and two tasks: `keeper` (START on `bench.open`, then sleeps, keeping the run open) and
`hit` (a no-op PythonTask, START on `bench.go`). The real `ledger scheduler --parallelism 2` runs as a
subprocess. The benchmark sends `bench.open`, waits for `keeper` to run, then `--sends` times: sleeps a
random 50 to 250 ms (so the scheduler is asleep, as it would be), sends `bench.go` through the signal
service, and waits until `hit`'s new try has started and ended. Latency = the try's started_at (written
by the scheduler from the worker's report) minus the wall time just before the send.

Reported per backend and mode: latency p50 and p90 in ms (median over repeats, with min and max).
Targets: p50 <= 50 ms on SQLite, <= 20 ms on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks._common import ledger_command, ledger_env, load_average, percentile, stop, summarise, utc, wait_for

DAG = '''
import time
import pendulum
from ledger import DAG, PythonTask


def keep(context):
    time.sleep(3600)


def hit(context):
    pass


with DAG("bench_signal", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("keeper", keep, signals={"bench.open": "START"})
    PythonTask("hit", hit, signals={"bench.go": "START"})
'''


def one_round(workdir: Path, url: str | None, mode: str, sends: int) -> dict[str, Any]:
    from ledger.services.signal_service import SignalService
    from ledger.store.db import make_engine, make_sessions

    home = workdir / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "bench_signal.py").write_text(DAG)
    extra = {"LEDGER_DATABASE_URL": url} if url else {}
    if mode == "poll":
        extra["LEDGER_SIGNAL_WAKEUP"] = "false"
    env = ledger_env(home, **extra)
    done = subprocess.run([*ledger_command(), "db", "upgrade"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ledger db upgrade failed: {done.stderr.strip()}")
    subprocess.run([*ledger_command(), "dags", "list"], env=env, capture_output=True, check=True)
    engine = make_engine(url or f"sqlite:///{home / 'ledger.db'}")
    service = SignalService(engine, make_sessions(engine), home)
    log = (workdir / "scheduler.out").open("wb")
    proc = subprocess.Popen([*ledger_command(), "scheduler", "--parallelism", "2"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)

    def try_of(task_id: str, number: int) -> tuple[Any, Any] | None:
        with engine.connect() as conn:
            row = conn.execute(text(
                "SELECT tt.started_at, tt.ended_at FROM task_try tt JOIN task_instance ti "
                "ON ti.id = tt.task_instance_id WHERE ti.task_id = :t AND tt.try_number = :n"),
                {"t": task_id, "n": number}).first()
        return (row[0], row[1]) if row is not None else None

    def wait(what: Any) -> Any:
        return wait_for(what, workdir / "scheduler.out")

    latencies: list[float] = []
    try:
        service.send("bench.open", "1", sender="benchmark")
        wait(lambda: (try_of("keeper", 1) or (None,))[0] is not None)
        rng = random.Random(7)
        for n in range(1, sends + 1):
            time.sleep(rng.uniform(0.05, 0.25))
            before = time.time()
            service.send("bench.go", str(n), sender="benchmark")
            started, _ended = wait(lambda n=n: (lambda t: t if t and t[0] is not None and t[1] is not None
                                                else None)(try_of("hit", n)))
            latencies.append((utc(started).timestamp() - before) * 1000.0)
    finally:
        stop(proc)
        log.close()
        engine.dispose()
    return {"p50_ms": percentile(latencies, 50), "p90_ms": percentile(latencies, 90), "max_ms": max(latencies)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--mode", choices=["signals", "poll", "both"], default="both")
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    modes = ["signals", "poll"] if args.mode == "both" else [args.mode]
    server = None
    if "postgres" in backends:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.pgserver import PostgresServer, postgres_available

        reason = postgres_available()  # None when a throwaway server can be started
        if reason is not None:
            print(json.dumps({"benchmark": "signal_latency", "backend": "postgres", "error": reason}), flush=True)
            backends.remove("postgres")
        else:
            server = PostgresServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="ledger-bench-signal-") as tmp:
            for backend in backends:
                for mode in modes:
                    rounds = []
                    load = load_average()
                    for i in range(args.repeat):
                        url = server.create_database(f"bench_{mode}_{i}") if backend == "postgres" and server \
                            else None
                        rounds.append(one_round(Path(tmp) / f"{backend}-{mode}-{i}", url, mode, args.sends))
                    out: dict[str, Any] = {"benchmark": "signal_latency", "backend": backend, "mode": mode,
                                           "sends": args.sends, "repeat": args.repeat, "load_before": load}
                    for key in ("p50_ms", "p90_ms"):
                        out.update(summarise(rounds, key, 2))
                    out["max_ms"] = round(max(r["max_ms"] for r in rounds), 2)
                    print(json.dumps(out), flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
