"""What one forked try costs in its own process: as a LocalExecutor worker runs it (the plan prepared in this
process, then `fork_try`), a no-op PythonTask, no scheduler or database.

    python -m benchmarks.forked_try --tries 200 [--key-file] [--profile] [--steps]

Prints one JSON line: the children's CPU per try in ms (user + system, RUSAGE_CHILDREN, after 10 tries of
warm-up) and their page faults (each page a child writes after the fork is copied for it: the faults count
them), the same for this process (the worker's side: the plan, the fork, the wait, the report taken) and, with
--profile, the Python calls per try (cProfile in each child from right after the fork; the profiler's own cost
makes the CPU figure of that run meaningless) and the functions with the most cumulative time. With --steps, the
worker's page faults and CPU per try in each step of its loop (the item made, the plan prepared, the process
settled, the fork, the plan forgotten, the wait with the report taken), read with getrusage around each step (the
reads' own cost is in the steps: that run's totals are a little higher). --key-file makes the Fernet key file in
the home first (its key is then masked in every try's log). To measure another tree (a `git archive` of a commit,
today's layout or the one before ledger/scheduler/runtime, e.g. `5484ae4`), run this file by its path with
PYTHONPATH at that tree: `PYTHONPATH=/tmp/old python benchmarks/forked_try.py --tries 200`
(it imports only ledger and scheduler).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # run by its path: this checkout's benchmarks, last
from benchmarks.executor_throughput import write_dag


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=200)
    parser.add_argument("--key-file", action="store_true", help="make the home's Fernet key file first")
    parser.add_argument("--profile", action="store_true", help="count Python calls per try (cProfile in each child)")
    parser.add_argument("--steps", action="store_true", help="the worker's page faults and CPU per step of its loop")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="ledger-forked-try-"))
    os.environ["LEDGER_HOME"] = str(tmp / "home")
    (tmp / "home").mkdir()
    try_plan, try_process, work_item = _runtime()
    if args.key_file:
        from ledger.infra.fernet import create_key_file, key_file

        create_key_file(key_file(tmp / "home"))
    dag = write_dag(tmp)  # executor_throughput's no-op task
    profiles = tmp / "profiles"
    profiles.mkdir()
    if args.profile:
        _profile_children(try_process, profiles)
    now = datetime(2024, 1, 1, tzinfo=UTC)

    steps = _Steps(args.steps)

    def one(i: int) -> None:
        steps.begin()
        item = work_item(ti_id=i, run_id=1, dag_id="bench_executor", task_id="a", try_number=1, fileloc=str(dag),
                        logical_date=now, data_interval_start=now, data_interval_end=now, dag_version="x",
                        run_type="manual", log_path=str(tmp / "logs" / f"ti_{i}.log"))
        steps.end("item")
        plan = try_plan.prepare(item, import_timeout=None)
        steps.end("prepare")
        if hasattr(try_plan, "settle"):  # as the LocalExecutor's worker does (decision 0313)
            try_plan.settle(plan)
        steps.end("settle")
        same = {"same_inputs": try_plan.settled_again()} if hasattr(try_plan, "settled_again") else {}
        running = try_process.fork_try(item, **same)  # (as the worker forks it: decision 0324)
        steps.end("fork")
        try_plan.forget_prepared()
        steps.end("forget")
        outcome = running.wait()
        steps.end("wait")
        if outcome is None or outcome.state != "success":
            raise SystemExit(f"a no-op try did not succeed: {outcome}")

    for i in range(10):
        one(i)
    steps.clear()
    for f in profiles.iterdir():
        f.unlink()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(args.tries):
        one(100 + i)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine_after = resource.getrusage(resource.RUSAGE_SELF)

    def per_try(a: Any, b: Any) -> dict[str, float]:
        return {"cpu_ms_per_try": round((b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1000 / args.tries, 3),
                "page_faults_per_try": round((b.ru_minflt - a.ru_minflt) / args.tries, 1)}

    child, worker = per_try(before, after), per_try(mine, mine_after)
    out: dict[str, Any] = {"benchmark": "forked_try", "tries": args.tries, "key_file": args.key_file,
                           "child_cpu_ms_per_try": child["cpu_ms_per_try"],
                           "child_page_faults_per_try": child["page_faults_per_try"],
                           "worker_cpu_ms_per_try": worker["cpu_ms_per_try"],
                           "worker_page_faults_per_try": worker["page_faults_per_try"],
                           "modules": len(sys.modules), "load": os.getloadavg()[0]}
    if args.steps:
        out["steps"] = steps.per_try(args.tries)
    if args.profile:
        files = sorted(str(f) for f in profiles.iterdir())
        out["calls_per_try"] = statistics.median(pstats.Stats(f).total_calls for f in files)  # type: ignore[attr-defined]
        stats = pstats.Stats(files[0], stream=io.StringIO())
        for f in files[1:]:
            stats.add(f)
        rows = stats.stats  # type: ignore[attr-defined]
        top = sorted(rows.items(), key=lambda kv: kv[1][3], reverse=True)[:12]
        out["top_cumulative_ms_per_try"] = {f"{Path(k[0]).name}:{k[2]}": round(v[3] * 1000 / len(files), 3)
                                            for k, v in top}
    print(json.dumps(out), flush=True)


class _Steps:
    """The worker's page faults and CPU in each step of its loop, summed over the tries (a no-op unless `on`)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.faults: dict[str, int] = {}
        self.cpu: dict[str, float] = {}
        self.last = (0, 0.0)

    @staticmethod
    def _now() -> tuple[int, float]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_minflt, r.ru_utime + r.ru_stime

    def begin(self) -> None:
        if self.on:
            self.last = self._now()

    def end(self, name: str) -> None:
        if self.on:
            now = self._now()
            self.faults[name] = self.faults.get(name, 0) + now[0] - self.last[0]
            self.cpu[name] = self.cpu.get(name, 0.0) + now[1] - self.last[1]
            self.last = self._now()

    def clear(self) -> None:
        self.faults.clear()
        self.cpu.clear()

    def per_try(self, tries: int) -> dict[str, dict[str, float]]:
        return {name: {"page_faults": round(n / tries, 1), "cpu_ms": round(self.cpu[name] * 1000 / tries, 3)}
                for name, n in self.faults.items()}


def _runtime() -> tuple[Any, Any, Any]:
    """(try_plan, try_process, WorkItem) of the tree on PYTHONPATH: today's layout, or the one before the runtime
    moved to ledger/scheduler/runtime (e.g. `5484ae4`: scheduler/try_plan.py)."""
    import importlib

    import ledger

    if (Path(ledger.__file__).parent.parent / "scheduler" / "try_plan.py").exists():  # (not a fallback on ImportError:
        # this environment's editable install would serve today's ledger.scheduler beside the old tree's ledger)
        names = ("scheduler.try_plan", "scheduler.try_process", "scheduler.executors.base")
    else:
        names = ("ledger.scheduler.runtime.try_plan", "ledger.scheduler.runtime.try_process",
                 "ledger.scheduler.executors.base")
    plan, process, base = (importlib.import_module(name) for name in names)
    return plan, process, base.WorkItem


def _profile_children(try_process: Any, folder: Path) -> None:
    """Each forked child profiles itself from right after the fork and writes its profile as it exits."""
    child_main = try_process._child_main

    def profiled(*args: Any) -> None:
        profile = cProfile.Profile()
        exit_now = os._exit

        def dump_and_exit(code: int) -> None:
            profile.disable()
            profile.dump_stats(str(folder / f"{os.getpid()}.prof"))
            exit_now(code)

        os._exit = dump_and_exit  # type: ignore[assignment]
        profile.enable()
        child_main(*args)

    try_process._child_main = profiled


if __name__ == "__main__":
    main()
