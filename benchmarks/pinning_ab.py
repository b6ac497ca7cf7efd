"""Interleaved A/B of `benchmarks.scheduler_throughput`: the code before versions pinned their code (A) against
the current code (B), to measure what pinning costs end to end.

    python -m benchmarks.pinning_ab --pairs 5 --runs 200

A is a git worktree of the commit before pinning (default /tmp/orig, commit 50fb910; create it with
`git worktree add /tmp/orig 50fb910`). Each round is one `python -m benchmarks.scheduler_throughput
--runs N --repeat 1` process (this checkout's benchmark code for both sides) whose environment has
PYTHONPATH=<A's worktree> (A) or PYTHONPATH=<this checkout> (B): the `ledger` console script it starts
(`db upgrade` and `scheduler`, and the scheduler's workers, which inherit the environment) then imports
`cli`, `ledger`, `scheduler` and `migrations` from that tree, ahead of the editable install. Before the
rounds, each side's `ledger db upgrade` in a scratch home must report its migration head (A: 0005, B:
0006 by default), and after every round the kept database's alembic_version is checked again, so a round
that silently ran the wrong code fails; `snapshots` counts the entries of $LEDGER_HOME/code/ after the
round (B's workers import the pinned code from there; A has none).

The machine is shared and noisy, so: one warm-up round per side (discarded: it also compiles the .pyc
files), then `--pairs` pairs in alternating order (AB, BA, AB, ...) so that drift in the background load
hits both sides alike; medians, min and max per side; the load average before each round.

Reported: ti_per_s_a, ti_per_s_b (median, min, max), cost = 1 - median(B) / median(A) (positive: B is
slower; requirement <= 5 %), the median of the per-pair costs (1 - B/A within each pair) with its min and
max, and the same for sched_cpu_ms_per_ti (CPU of the scheduler process per task instance, less sensitive
to other processes than wall time). Prints one JSON line (`--each` also prints one line per round).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import ledger_command, load_average

HERE = Path(__file__).resolve().parent.parent


def side_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(tree)
    return env


def migration_head(tree: Path, scratch: Path) -> str:
    """The revision `ledger db upgrade` brings an empty database to with PYTHONPATH=tree."""
    home = scratch / f"head-{tree.name}"
    home.mkdir(parents=True)
    done = subprocess.run([*ledger_command(), "db", "upgrade"], env={**side_env(tree), "LEDGER_HOME": str(home)},
                          capture_output=True, text=True, check=False, cwd=scratch)
    if done.returncode != 0:
        raise SystemExit(f"`ledger db upgrade` with PYTHONPATH={tree} failed: {done.stderr.strip()[-2000:]}")
    return db_revision(home / "ledger.db")


def db_revision(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        conn.close()


def one_round(side: str, tree: Path, workdir: Path, runs: int, parallelism: int, expect_head: str
              ) -> dict[str, Any]:
    load = load_average()
    cmd = [sys.executable, "-m", "benchmarks.scheduler_throughput", "--runs", str(runs), "--repeat", "1",
           "--parallelism", str(parallelism), "--keep", str(workdir)]
    done = subprocess.run(cmd, env=side_env(tree), cwd=HERE, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"side {side}: scheduler_throughput failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    revision = db_revision(workdir / "round0" / "home" / "ledger.db")
    if revision != expect_head:
        raise SystemExit(f"side {side}: the database is at {revision}, expected {expect_head}: wrong code ran")
    code_dir = workdir / "round0" / "home" / "code"  # where B's workers materialise the pinned snapshots
    snapshots = sum(1 for _ in code_dir.iterdir()) if code_dir.is_dir() else 0
    return {"side": side, "ti_per_s": result["ti_per_s"], "seconds": result["seconds"],
            "startup_s": result["startup_s"], "exec_ti_per_s": result["exec_ti_per_s"],
            "sched_cpu_ms_per_ti": result["sched_cpu_ms_per_ti"], "lag_p50_ms": result["lag_p50_ms"],
            "load_before": load, "revision": revision,
            "snapshots": snapshots}


def stats(values: list[float], digits: int = 2) -> dict[str, float]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5, help="A/B pairs (after one warm-up round per side)")
    parser.add_argument("--runs", type=int, default=200, help="scheduler_throughput --runs")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--orig", type=Path, default=Path("/tmp/orig"), help="worktree of the code before pinning")
    parser.add_argument("--head-a", default="0005", help="migration head expected of A")
    parser.add_argument("--head-b", default="0006", help="migration head expected of B")
    parser.add_argument("--repeat", type=int, default=None, help="same as --pairs (for `python -m benchmarks`)")
    parser.add_argument("--each", action="store_true", help="also print one JSON line per round")
    args = parser.parse_args(argv)
    pairs = args.repeat if args.repeat is not None else args.pairs
    if pairs < 1 or args.runs < 1:
        parser.error("--pairs and --runs must be at least 1")
    if not (args.orig / "ledger" / "__init__.py").exists():
        raise SystemExit(f"{args.orig} is not a checkout of ledger: git -C {HERE} worktree add {args.orig} 50fb910")
    trees = {"A": args.orig.resolve(), "B": HERE}
    heads = {"A": args.head_a, "B": args.head_b}

    rounds: list[dict[str, Any]] = []
    loads = [load_average()]
    with tempfile.TemporaryDirectory(prefix="ledger-ab-") as tmp:
        scratch = Path(tmp)
        for side, tree in trees.items():
            head = migration_head(tree, scratch)
            if head != heads[side]:
                raise SystemExit(f"side {side} (PYTHONPATH={tree}) migrates to {head}, expected {heads[side]}")
        order = ["A", "B"]  # warm-up, discarded
        for i in range(pairs):
            order += ["A", "B"] if i % 2 == 0 else ["B", "A"]
        for n, side in enumerate(order):
            result = one_round(side, trees[side], scratch / f"r{n:02d}{side}", args.runs, args.parallelism,
                               heads[side])
            result["warmup"] = n < 2
            rounds.append(result)
            if args.each:
                print(json.dumps({"benchmark": "pinning_ab_round", "round": n, **result}), flush=True)
        loads.append(load_average())

    measured = [r for r in rounds if not r["warmup"]]
    a = [r for r in measured if r["side"] == "A"]
    b = [r for r in measured if r["side"] == "B"]
    out: dict[str, Any] = {"benchmark": "pinning_ab", "runs": args.runs, "pairs": pairs,
                           "task_instances": args.runs * 5, "orig": str(trees["A"]), "heads": heads}
    for key, digits in (("ti_per_s", 1), ("sched_cpu_ms_per_ti", 3), ("startup_s", 3), ("exec_ti_per_s", 1)):
        sa, sb = stats([r[key] for r in a], digits), stats([r[key] for r in b], digits)
        out[f"{key}_a"], out[f"{key}_b"] = sa, sb
    out["cost"] = round(1 - out["ti_per_s_b"]["median"] / out["ti_per_s_a"]["median"], 4)
    pair_costs = [1 - rb["ti_per_s"] / ra["ti_per_s"] for ra, rb in zip(a, b, strict=True)]
    out["pair_cost"] = stats(pair_costs, 4)
    out["cpu_cost"] = round(out["sched_cpu_ms_per_ti_b"]["median"] / out["sched_cpu_ms_per_ti_a"]["median"] - 1, 4)
    out["cost_ok"] = out["cost"] <= 0.05
    out["load"] = {"start": loads[0], "end": loads[-1], "rounds": stats([r["load_before"] for r in rounds], 2)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
