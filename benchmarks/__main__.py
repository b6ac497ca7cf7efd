"""Run the benchmarks (what `make bench` runs): one JSON line per measure on stdout.

    python -m benchmarks                              # every benchmark, --repeat 3
    python -m benchmarks scheduler_throughput         # only some (names below, or unique prefixes)
    python -m benchmarks --repeat 5 --quick           # --quick: smaller sizes, for a smoke test
    python -m benchmarks scheduler_throughput -- --runs 500 --each   # after --: passed to the benchmark(s)
    python -m benchmarks --list

Each benchmark runs as its own `python -m benchmarks.<name>` process (so one's memory and processes do
not leak into the next); one that fails prints {"benchmark": name, "error": ...} and the others still run;
the exit status is non-zero if any failed. Results are described in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

# name -> (default arguments, --quick arguments); --repeat is added to both
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "scheduler_throughput": (["--runs", "200"], ["--runs", "40"]),
    "scheduler_memory": (["--files", "1000", "--tasks", "10"], ["--files", "200", "--tasks", "10"]),
    "parse_dags": (["--files", "1000", "--tasks", "10"], ["--files", "200", "--tasks", "10"]),
    "executor_throughput": (["--tries", "1000", "--parallelism", "2"], ["--tries", "200", "--parallelism", "2"]),
    # smaller than its docstring's reference sizes (--dates 1000 --existing 100000 --splice 10000)
    "signal_latency": (["--sends", "40"], ["--sends", "10"]),
    "backfill_bench": (["--dates", "200", "--existing", "20000", "--splice", "2000"],
                       ["--dates", "40", "--existing", "2000", "--splice", "200"]),
    "code_storage": (["--files", "1000", "--package-kb", "1024"], ["--files", "100", "--package-kb", "256"]),
    # --repeat is its number of A/B pairs; needs the worktree of the code before pinning (see its docstring)
    "pinning_ab": (["--runs", "200"], ["--runs", "40"]),
    # a busy scheduler with and without `ledger timeline --json` of a 100,000-run DAG read beside it
    "read_beside_scheduler": (["--existing", "100000", "--runs", "100"], ["--existing", "10000", "--runs", "20"]),
    "web_bench": (["--existing", "100000", "--requests", "500"], ["--existing", "10000", "--requests", "100"]),
    "grid_bench": (["--runs", "10000", "--tasks", "20"], ["--runs", "1000", "--tasks", "20"]),
    "downstream_plan": (["--partitions", "1000"], ["--partitions", "100"]),
    "dataset_latency": (["--events", "30"], ["--events", "10"]),
    "cli_startup": (["--rounds", "15"], ["--rounds", "3"]),
    # the audit chain: verifying one DAG's chain, and the chain's share of the scheduler's profiled CPU
    "audit_verify": (["--events", "100000"], ["--events", "10000"]),
    "chain_cost": (["--runs", "200"], ["--runs", "40"]),
    # a fork and reap by the forking process's size (bare, a LocalExecutor worker, the scheduler): issue 43's bound
    "fork_cost": (["--forks", "400"], ["--forks", "100"]),
}


def resolve(names: list[str]) -> list[str]:
    chosen: list[str] = []
    for name in names:
        matches = [b for b in BENCHMARKS if b == name] or [b for b in BENCHMARKS if b.startswith(name)]
        if len(matches) != 1:
            known = ", ".join(BENCHMARKS)
            why = "is ambiguous" if matches else "is unknown"
            raise SystemExit(f"benchmark {name!r} {why}; choose from: {known}")
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen or list(BENCHMARKS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all): {', '.join(BENCHMARKS)}")
    parser.add_argument("--repeat", type=int, default=3, help="repeats per benchmark; medians are reported")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test, not the reference numbers)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (default, _quick) in BENCHMARKS.items():
            print(f"{name:22} python -m benchmarks.{name} {' '.join(default)} --repeat {args.repeat}")
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    failed = 0
    for name in resolve(args.names):
        default, quick = BENCHMARKS[name]
        cmd = [sys.executable, "-m", f"benchmarks.{name}", *(quick if args.quick else default),
               "--repeat", str(args.repeat), *passthrough]
        started = time.perf_counter()
        printed = 0
        with tempfile.TemporaryFile("w+") as errors:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:  # streamed: a long benchmark shows each result as it comes
                if line.strip():
                    print(line.rstrip("\n"), flush=True)
                    printed += 1
            returncode = proc.wait()
            errors.seek(0)
            stderr = errors.read()
        if returncode != 0 or not printed:
            failed += 1
            reason = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
            print(json.dumps({"benchmark": name, "error": reason, "returncode": returncode,
                              "seconds": round(time.perf_counter() - started, 1)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
