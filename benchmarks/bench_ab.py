"""Interleaved A/B of the default-path benchmarks between two source trees (issue 43): the guard against slow drift.

    python -m benchmarks.bench_ab --base 5484ae4                 # or: make bench-ab BASE=5484ae4
    python -m benchmarks.bench_ab --base main --pairs 5 --dates 300 --runs 200

A is `git archive <base>`, B is `git archive` of this checkout's working tree (its tracked files as they are now,
uncommitted changes included; `--head COMMIT` for a commit instead), each extracted into its own scratch folder
and byte-compiled there. A round runs one benchmark with PYTHONPATH=<that tree>, so the `ledger` console script
of this environment (`db upgrade`, `backfill`, `scheduler`) and every process it starts import `cli`, `ledger`,
`scheduler`, `backfill` and `migrations` from that tree (checked once per tree before the rounds); the benchmark
code that drives them is this checkout's, the same for both sides. The benchmarks are the default path, nothing
set but the scratch home:

  backfill    `ledger backfill bf --start ... --end ... --yes`: --dates daily dates x 5 chained no-op Python tasks,
              SQLite, the LocalExecutor, a fork per try (benchmarks/backfill_bench.py's end_to_end): TI/s.
  scheduler   `ledger scheduler --exit-when-idle --executor local`: --runs due runs x 5 chained no-op tasks
              (benchmarks/scheduler_throughput.py, forked tries): TI/s, and the scheduler process's CPU per TI.
  celery      the same with `--executor celery` (benchmarks/celery_cluster.py: a redis-server, the webserver and
              two `ledger worker`s of 2 slots, all run with the tree's code): TI/s, the scheduler's CPU per TI (the
              process alone, and with the processes it starts), lag p50. Not run unless named (--only celery).
  statements  the scheduler benchmark with the scheduler process counting its SQL statements
              (benchmarks/statement_count): statements per TI, which the machine's load moves little. Not run
              unless named (--only statements).

The machine is shared and noisy, so: one warm-up round per side and benchmark (discarded), then --pairs pairs in
alternating order (A B, B A, A B, ...) so that drift in the background load hits both sides alike. Printed: one
line per round (with the load average before it), then per benchmark each pair's B/A ratio and the medians of
A, of B and of the ratios (ratio > 1: B is faster in TI/s; for CPU per TI, < 1 is B cheaper). `--json` prints
the summary as one JSON line as well.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import backfill_bench, scheduler_throughput
from benchmarks._common import load_average

HERE = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "ledger", "scheduler", "backfill", "migrations")


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def working_tree_commit() -> str:
    """A commit of the working tree's tracked files as they are now (`git stash create`; HEAD when clean)."""
    return git("stash", "create") or git("rev-parse", "HEAD")


def extract(commit: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = into.with_suffix(".tar")
    git("archive", "--format=tar", f"--output={archive}", commit)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    subprocess.run([sys.executable, "-m", "compileall", "-q", *[p for p in PACKAGES if (into / p).is_dir()]],
                   cwd=into, check=True)
    return into


def check_imports_from(tree: Path, scratch: Path) -> None:
    """SystemExit unless an interpreter with PYTHONPATH=tree (as the console script runs) imports the packages
    from `tree`."""
    probe = "import sys, cli, ledger, scheduler; print('\\n'.join(m.__file__ for m in (cli, ledger, scheduler)))"
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(tree)}, cwd=scratch,
                          capture_output=True, text=True, check=False)
    files = done.stdout.split()
    if done.returncode != 0 or len(files) != 3 or not all(Path(f).is_relative_to(tree) for f in files):
        raise SystemExit(f"with PYTHONPATH={tree} the packages come from elsewhere: {done.stdout}{done.stderr}")


def backfill_round(workdir: Path, args: argparse.Namespace) -> dict[str, float]:
    return {"ti_per_s": backfill_bench.end_to_end(args.dates)["ti_per_second"]}


def scheduler_round(workdir: Path, args: argparse.Namespace) -> dict[str, float]:
    found = scheduler_throughput.one_round(workdir, args.runs, args.parallelism, {}, keep_output=False,
                                           timeout=args.timeout)
    return {"ti_per_s": found["ti_per_s"], "sched_cpu_ms_per_ti": found["sched_cpu_ms_per_ti"],
            "workers_cpu_ms_per_ti": found["workers_cpu_ms_per_ti"],
            "tries_cpu_ms_per_ti": found["tries_cpu_ms_per_ti"]}


def celery_round(workdir: Path, args: argparse.Namespace) -> dict[str, float]:
    found = scheduler_throughput.one_round(workdir, args.runs, 2, {}, keep_output=False, timeout=args.timeout,
                                           executor="celery")
    return {"ti_per_s": found["ti_per_s"], "sched_cpu_ms_per_ti": found["sched_cpu_ms_per_ti"],
            "sched_tree_cpu_ms_per_ti": found["sched_tree_cpu_ms_per_ti"], "lag_p50_ms": found["lag_p50_ms"]}


def statements_round(workdir: Path, args: argparse.Namespace) -> dict[str, float]:
    found = scheduler_throughput.one_round(workdir, args.runs, 2, {}, keep_output=False, timeout=args.timeout,
                                           statements=True)
    return {"ti_per_s": found["ti_per_s"], "statements_per_ti": found["statements_per_ti"]}


BENCHMARKS: dict[str, Callable[[Path, argparse.Namespace], dict[str, float]]] = {
    "backfill": backfill_round, "scheduler": scheduler_round, "celery": celery_round,
    "statements": statements_round}


def run_side(tree: Path, scratch: Path, name: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One round of benchmark `name` with the code of `tree` (PYTHONPATH for every process it starts; the
    working folder a scratch one, so nothing is imported from this checkout by a `python -m` child)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    here = os.getcwd()
    os.chdir(scratch)
    try:
        load = load_average()
        return {"load": load, **BENCHMARKS[name](workdir, args)}
    finally:
        os.chdir(here)
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def median(values: list[float]) -> float:
    return statistics.median(values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="commit A (the code before)")
    parser.add_argument("--head", help="commit B (default: this checkout's working tree)")
    parser.add_argument("--pairs", type=int, default=3, help="A/B pairs per benchmark, after one warm-up per side")
    parser.add_argument("--dates", type=int, default=300, help="backfill: daily dates (x 5 tasks)")
    parser.add_argument("--runs", type=int, default=200, help="scheduler: due runs (x 5 tasks)")
    parser.add_argument("--parallelism", type=int, default=2,
                        help="scheduler: `ledger scheduler --parallelism` (2, as scheduler_throughput runs it; the "
                             "setting's default is 4)")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append", help="run only this benchmark")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true", help="also print the summary as one JSON line")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.dates < 1 or args.runs < 1:
        parser.error("--pairs, --dates and --runs must be at least 1")
    names = args.only or ["backfill", "scheduler"]
    commits = {"A": git("rev-parse", "--verify", f"{args.base}^{{commit}}"),
               "B": git("rev-parse", "--verify", f"{args.head}^{{commit}}") if args.head else working_tree_commit()}
    order = ["A", "B"]
    for i in range(args.pairs):
        order += ["A", "B"] if i % 2 == 0 else ["B", "A"]
    rounds: dict[str, list[tuple[str, dict[str, Any]]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-ab-") as tmp:
        scratch = Path(tmp)
        trees = {side: extract(commit, scratch / f"tree-{side}") for side, commit in commits.items()}
        for tree in trees.values():
            check_imports_from(tree, scratch)
        print(f"A = {args.base} ({commits['A'][:10]}), B = {args.head or 'working tree'} ({commits['B'][:10]}); "
              f"{args.pairs} pairs after one warm-up per side; load {load_average()}", flush=True)
        for n, side in enumerate(order):
            for name in names:
                found = run_side(trees[side], scratch, name, scratch / f"r{n:02d}-{name}-{side}", args)
                warm = n < 2
                if not warm:
                    rounds[name].append((side, found))
                extra = "".join(f"  {k} {v:.3f}" for k, v in found.items() if k not in ("load", "ti_per_s"))
                print(f"{'warm-up' if warm else f'round {n - 1:2d}'}  {name:9s}  {side}  "
                      f"{found['ti_per_s']:7.1f} TI/s{extra}  (load {found['load']})", flush=True)
    summary: dict[str, Any] = {"benchmark": "bench_ab", "base": commits["A"], "head": commits["B"],
                               "pairs": args.pairs, "dates": args.dates, "runs": args.runs}
    for name in names:
        a = [r for side, r in rounds[name] if side == "A"]
        b = [r for side, r in rounds[name] if side == "B"]
        for key in a[0]:
            if key == "load":
                continue
            ratios = [rb[key] / ra[key] for ra, rb in zip(a, b, strict=True)]
            med = {"a": round(median([r[key] for r in a]), 3), "b": round(median([r[key] for r in b]), 3),
                   "ratio": round(median(ratios), 3)}
            summary[f"{name}_{key}"] = {**med, "pair_ratios": [round(x, 3) for x in ratios]}
            print(f"{name:9s} {key:20s} A median {med['a']:8.2f}  B median {med['b']:8.2f}  B/A per pair "
                  f"{' '.join(f'{x:.3f}' for x in ratios)}  median {med['ratio']:.3f}", flush=True)
    if args.json:
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
