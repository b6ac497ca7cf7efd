"""The audit chain's share of the scheduler's CPU (issue 45: at most 5 %), measured in a way this machine's load does
not blur: one `scheduler_throughput` round (N due runs x 5 chained no-op tasks, the LocalExecutor, SQLite) with the
real `ledger scheduler --exit-when-idle` run under cProfile on a CPU-time clock (time.process_time), then the CPU
spent inside the chain's functions over the scheduler process's whole CPU.

    python -m benchmarks.chain_cost --runs 200 --repeat 3

Counted as the chain's: noting each event for its chain as it is recorded (ledger/store/chain.py `to_link`) and
linking a transaction's events before it commits (`link`: the heads read under lock, the runs' covers read, the
hashes, the events' inserts, which decision 0327 moved there from `record_many`, and the heads' update); both
include what they call in ledger/core/audit.py. Profiling slows every Python call alike, so the share is what is
compared; the absolute seconds are the profiler's, not the scheduler's. The interleaved A/B against a tree with the
chain turned off (`benchmarks.bench_ab --base <such a tree>`) measures the same thing in wall-clock CPU, with this
machine's noise.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_env, load_average
from benchmarks.scheduler_throughput import write_dag

CHAIN = (("ledger/store/chain.py", "to_link"), ("ledger/store/chain.py", "link"))


def profiled_cli(out: str, args: list[str]) -> None:
    """Run the ledger CLI with `args` in this process under cProfile (CPU time), its stats written to `out`."""
    from ledger.cli.app import run

    sys.argv = ["ledger", *args]
    profile = cProfile.Profile(time.process_time)
    try:
        profile.runcall(run)
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        profile.dump_stats(out)


def chain_share(stats_file: Path) -> dict[str, float]:
    stats = pstats.Stats(str(stats_file))
    total = stats.total_tt  # type: ignore[attr-defined]
    chain = sum(row[3] for (path, _line, name), row in stats.stats.items()  # type: ignore[attr-defined]
                if any(path.endswith(f) and name == n for f, n in CHAIN))
    return {"profiled_cpu_s": total, "chain_cpu_s": chain, "chain_share_pct": 100.0 * chain / total}


def one_round(workdir: Path, runs: int) -> dict[str, float]:
    home = workdir / "home"
    home.mkdir(parents=True)
    db_upgrade(home)
    write_dag(home / "dags", runs, datetime.now(UTC))
    out = workdir / "scheduler.prof"
    cmd = [sys.executable, "-m", "benchmarks.chain_cost", "--profile-to", str(out), "--",
           "scheduler", "--exit-when-idle", "--parallelism", "2", "--executor", "local"]
    done = subprocess.run(cmd, env=ledger_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False, cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        raise SystemExit(f"`ledger scheduler` under the profiler exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return chain_share(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="due runs (x 5 tasks)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    parser.add_argument("cli_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile_to:
        profiled_cli(args.profile_to, args.cli_args)
        return
    if args.runs < 1 or args.repeat < 1:
        parser.error("--runs and --repeat must be at least 1")
    rounds = []
    for _ in range(args.repeat):
        load = load_average()
        with tempfile.TemporaryDirectory(prefix="ledger-chain-cost-") as scratch:
            measured = one_round(Path(scratch), args.runs)
        rounds.append(measured)
        print(f"chain {measured['chain_share_pct']:.2f} % of the scheduler's profiled CPU "
              f"({measured['chain_cpu_s']:.3f} s of {measured['profiled_cpu_s']:.2f} s; load {load})", flush=True)
    shares = [r["chain_share_pct"] for r in rounds]
    print(json.dumps({"benchmark": "chain_cost", "runs": args.runs, "repeat": args.repeat,
                      "chain_share_pct_median": round(statistics.median(shares), 2),
                      "chain_share_pct": [round(s, 2) for s in shares]}))


if __name__ == "__main__":
    main()
