"""Benchmark `ledger audit verify` on a long history: N events of one DAG, written through the real door.

    python -m benchmarks.audit_verify --events 100000 --repeat 3

For each repeat: a fresh LEDGER_HOME in a temporary folder, `ledger db upgrade`, one DAG registered in process
with --runs runs (ledger.store.runs.splice), then events about those runs (`ledger.store.events.record_many`, as
the scheduler writes them, 1000 per transaction, linked into the DAG's chain as each commits) until the chain
holds N; then

    ledger audit verify          (the real command, a subprocess: every chain, every run, every code blob)

Measured (median of the repeats, plus min and max):
  verify_s             wall time of that command
  verify_cpu_s         its CPU time (user + system, from the child's rusage)
  events_per_s         N / verify_s
  write_s              wall time of writing the N events (for reading the size of the history, not a result)
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pendulum

from benchmarks._common import db_upgrade, ledger_command, ledger_env, load_average, summarise

T0 = pendulum.datetime(2024, 1, 1, tz="UTC")
BATCH = 1000


def build(home: Path, events: int, runs: int) -> float:
    from sqlalchemy import func, select

    from ledger import DAG, BashTask
    from ledger.core.states import RunType
    from ledger.models import Event
    from ledger.services.sync import register_dag
    from ledger.store import dags as dag_store
    from ledger.store import events as event_store
    from ledger.store import runs as run_store
    from ledger.store.db import make_engine, make_sessions

    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    sessions = make_sessions(engine)
    with DAG("long", schedule="@daily", start_date=T0, catchup=True) as dag:
        BashTask("a", "echo a")
    dag.fileloc = str(home / "dags" / "long.py")
    started = time.perf_counter()
    with sessions.begin() as s:
        register_dag(s, dag, now=T0, actor="bench")
        spec = dag_store.current_spec(s, "long")
        ids = [run_store.splice(s, spec, run_store.NewRun(spec.schedule.interval_for(T0.add(days=d)),
                                                          RunType.BACKFILL), now=T0, actor="bench").id
               for d in range(runs)]
        written = int(s.scalar(select(func.count()).select_from(Event)))  # the events the set-up wrote
    n = 0
    while written < events:
        rows: list[dict[str, Any]] = []
        for _ in range(min(BATCH, events - written)):
            rows.append({"at": T0, "kind": "sensor_checked", "actor": "bench", "dag_id": "long",
                         "run_id": ids[n % len(ids)], "details": {"task_id": "a", "poke": n}})
            n += 1
        with sessions.begin() as s:
            event_store.record_many(s, rows)
        written += len(rows)
    engine.dispose()
    return time.perf_counter() - started


def one_round(events: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-audit-") as tmp:
        home = Path(tmp)
        (home / "dags").mkdir()
        db_upgrade(home)
        write_s = build(home, events, runs)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([*ledger_command(), "audit", "verify"], env=ledger_env(home), capture_output=True,
                              text=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"`ledger audit verify` failed: {done.stdout}{done.stderr}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"verify_s": wall, "verify_cpu_s": cpu, "events_per_s": events / wall, "write_s": write_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.events < 1 or args.runs < 1 or args.repeat < 1:
        parser.error("--events, --runs and --repeat must be at least 1")
    load = load_average()
    rounds = [one_round(args.events, args.runs) for _ in range(args.repeat)]
    out: dict[str, Any] = {"events": args.events, "runs": args.runs, "repeat": args.repeat, "load": load}
    for key in ("verify_s", "verify_cpu_s", "events_per_s", "write_s"):
        out.update(summarise(rounds, key, 3))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
