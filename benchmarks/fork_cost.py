"""What a fork per try costs by what the forking process holds (issue 43 part 2: what bounds the default path).

    python -m benchmarks.fork_cost --forks 400 --repeat 3

For each size, a fresh interpreter imports what such a process holds, then forks --forks children that exit at
once (`os._exit`) and reaps each (`waitpid`), as a LocalExecutor worker forks, and its child ends, every try:

  bare        nothing beyond the interpreter's own start
  worker      a LocalExecutor worker's imports (ledger.scheduler.executors.local, which holds the try's runtime)
  scheduler   `ledger scheduler`'s imports (its command, the loop, the store and the ORM, the LocalExecutor)

Prints one JSON line per size: its anonymous resident memory (RssAnon, kB: the pages whose page-table entries a
fork copies and write-protects, and the child's exit takes down again), its memory mappings (each one a fork
copies), and the wall and CPU time of one fork, exit and reap in ms (the forking process's and its children's
CPU together), the median over --repeat rounds (each round a fresh interpreter). Nothing a try does is in it:
benchmarks/forked_try.py measures a no-op try's own process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

IMPORTS = {
    "bare": "",
    "worker": "import ledger.scheduler.executors.local",
    "scheduler": "import ledger.cli.scheduler, ledger.scheduler.loop.scheduler_job, ledger.store.runs, "
                 "ledger.scheduler.executors.local",
}

_ROUND = r"""
import json, os, resource, sys, time
{imports}
def status(key):
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key + ":")).split()[1])
with open("/proc/self/maps") as f:
    mappings = sum(1 for _ in f)
forks = int(sys.argv[1])
mine, theirs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
began = time.perf_counter()
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
wall = time.perf_counter() - began
mine2, theirs2 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in ((mine, mine2), (theirs, theirs2)))
print(json.dumps({{"rss_anon_kb": status("RssAnon"), "mappings": mappings, "wall_ms": wall * 1000 / forks,
                  "cpu_ms": cpu * 1000 / forks}}))
"""


def one_round(size: str, forks: int) -> dict[str, float]:
    code = _ROUND.format(imports=IMPORTS[size])
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), root) if p)}
    done = subprocess.run([sys.executable, "-c", code, str(forks)], capture_output=True, text=True, check=True,
                          env=env)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forks", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", choices=list(IMPORTS), default=list(IMPORTS))
    args = parser.parse_args(argv)
    for size in args.sizes:
        rounds = [one_round(size, args.forks) for _ in range(args.repeat)]
        out = {"benchmark": "fork_cost", "size": size, "forks": args.forks, "repeat": args.repeat,
               "rss_anon_kb": int(statistics.median(r["rss_anon_kb"] for r in rounds)),
               "mappings": int(statistics.median(r["mappings"] for r in rounds))}
        for key in ("wall_ms", "cpu_ms"):
            values = [r[key] for r in rounds]
            out[key] = round(statistics.median(values), 3)
            out[f"{key}_min"], out[f"{key}_max"] = round(min(values), 3), round(max(values), 3)
        out["load"] = round(os.getloadavg()[0], 2)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
