"""Helpers shared by the benchmarks that drive the real `ledger` command line in a scratch LEDGER_HOME."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def ledger_command() -> list[str]:
    """The `ledger` console script of the running interpreter's environment (falls back to `python -m cli`). A
    tree on PYTHONPATH from before the one top package (decision 0296: no ledger/cli, its CLI at cli/app.py, as
    `bench_ab --base 5484ae4` runs) is run through its own entry point: the console script imports ledger.cli."""
    tree = Path(os.environ.get("PYTHONPATH") or ".")
    if not (tree / "ledger" / "cli").exists() and (tree / "cli" / "app.py").exists():
        return [sys.executable, "-c", "from cli.app import run; run()"]
    beside = Path(sys.executable).with_name("ledger")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ledger")
    if found:
        return [found]
    return [sys.executable, "-c", "from ledger.cli.app import run; run()"]


def ledger_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a `ledger` subprocess working in `home` (its database and DAGs folder live there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"LEDGER_HOME": str(home), "LEDGER_DAGS_FOLDER": str(home / "dags"), "COLUMNS": "200"})
    env.update(extra)
    return env


def db_upgrade(home: Path) -> None:
    done = subprocess.run([*ledger_command(), "db", "upgrade"], env=ledger_env(home), capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"`ledger db upgrade` failed ({done.returncode}): {done.stderr.strip() or done.stdout}")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarise(rounds: list[dict[str, Any]], key: str, digits: int = 4) -> dict[str, float]:
    """median, min and max of one measure over the repeats, as `<key>`, `<key>_min`, `<key>_max`."""
    values = [r[key] for r in rounds]
    return {key: round(statistics.median(values), digits), f"{key}_min": round(min(values), digits),
            f"{key}_max": round(max(values), digits)}


# -- running a process while sampling it from /proc ----------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _status_kb(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _pss_kb(pid: int) -> int | None:
    """Proportional set size (shared pages split between the processes sharing them), from smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cpu_and_start(pid: int) -> tuple[float, int] | None:
    """(utime + stime of the process itself, not of its children; when it started, in clock ticks since boot), from
    one read of /proc/<pid>/stat (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of the process itself (not of its children)."""
    found = _cpu_and_start(pid)
    return None if found is None else found[0]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return []


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def run_sampled(cmd: list[str], *, env: dict[str, str], stdout: Any, interval: float = 0.02,
                timeout: float | None = None, pss: bool = False) -> dict[str, Any]:
    """Run `cmd`, sampling it every `interval` s from /proc, and return what was seen:

    returncode, seconds (wall, start to exit), main_cpu_s (the process's own user+sys CPU at the last
    sample), main_hwm_mb (its VmHWM, the kernel's peak RSS, at the last sample), main_rss_max_mb (the largest
    VmRSS sampled), children_rss_max_mb (the largest sum of the VmRSS of all its descendants in one
    sample), child_rss_max_mb (the largest VmRSS of any one descendant), children_max (most descendants
    seen at once), total_cpu_s (user+sys of the process and every descendant it and they waited for,
    from wait4), samples.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.STDOUT)
    seen: dict[str, Any] = {"main_cpu_s": 0.0, "main_hwm_kb": 0, "main_rss_max_kb": 0, "children_rss_max_kb": 0,
                            "child_rss_max_kb": 0, "children_max": 0, "samples": 0,
                            "main_pss_max_kb": 0, "children_pss_max_kb": 0}
    children_own: dict[tuple[int, int], float] = {}  # (pid, start time) of a direct child -> its own CPU at its
    # last sample (not its children's; what it uses after that sample, as it exits, is not counted)
    status, rusage, done = 0, None, False
    try:
        while True:
            pid_done, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid_done == proc.pid:
                done = True
                break
            cpu = _cpu_seconds(proc.pid)
            hwm = _status_kb(proc.pid, "VmHWM")
            rss = _status_kb(proc.pid, "VmRSS")
            if cpu is not None:
                seen["main_cpu_s"] = cpu
            if hwm:
                seen["main_hwm_kb"] = max(seen["main_hwm_kb"], hwm)
            if rss:
                seen["main_rss_max_kb"] = max(seen["main_rss_max_kb"], rss)
            for child in _children(proc.pid):  # (its executor's workers, its DAG file processors...)
                found = _cpu_and_start(child)
                if found is not None:
                    children_own[(child, found[1])] = found[0]  # (a pid used again is another child)
            kids = descendants(proc.pid)
            sizes = [s for s in (_status_kb(k, "VmRSS") for k in kids) if s]
            seen["children_rss_max_kb"] = max(seen["children_rss_max_kb"], sum(sizes))
            seen["child_rss_max_kb"] = max([seen["child_rss_max_kb"], *sizes])
            seen["children_max"] = max(seen["children_max"], len(kids))
            if pss:
                seen["main_pss_max_kb"] = max(seen["main_pss_max_kb"], _pss_kb(proc.pid) or 0)
                seen["children_pss_max_kb"] = max(seen["children_pss_max_kb"],
                                                  sum(_pss_kb(k) or 0 for k in kids))
            seen["samples"] += 1
            if timeout is not None and time.perf_counter() - started > timeout:
                proc.kill()
            time.sleep(interval)
    finally:
        if not done:  # interrupted: do not leave the scheduler behind
            proc.kill()
            _, status, rusage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = {"returncode": proc.returncode, "seconds": seconds,
           "total_cpu_s": rusage.ru_utime + rusage.ru_stime if rusage is not None else None,
           "main_cpu_s": seen["main_cpu_s"], "children_own_cpu_s": sum(children_own.values()),
           "children_max": seen["children_max"], "samples": seen["samples"]}
    for key in ("main_hwm", "main_rss_max", "children_rss_max", "child_rss_max", "main_pss_max", "children_pss_max"):
        out[f"{key}_mb"] = seen[f"{key}_kb"] / 1024.0
    return out


def utc(value: Any) -> datetime:
    """A timestamp read from the database (a datetime, or its text on SQLite) as an aware UTC datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def wait_for(what: Any, log: Path, timeout: float = 60.0) -> Any:
    """Poll `what()` every 5 ms until it gives something true, and return that; SystemExit naming `log` (the
    scheduler's output) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.005)
    raise SystemExit(f"timed out; scheduler output in {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process started for a benchmark (SIGTERM, then SIGKILL after 60 s)."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def physical_baseline(samples: int = 200) -> dict[str, float]:
    """What this machine allows at the moment, measured beside a benchmark (issue 13, item 7): the median time
    for a warm interpreter to fork a child that exits at once and reap it (ms), and the median time of one
    small SQLite transaction committed in WAL mode with synchronous=NORMAL, as ledger opens its file (us)."""
    import sqlite3
    import tempfile

    forks = []
    for _ in range(samples):
        began = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        forks.append(time.perf_counter() - began)
    commits = []
    with tempfile.TemporaryDirectory(prefix="ledger-baseline-") as folder:
        conn = sqlite3.connect(os.path.join(folder, "b.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        for i in range(samples * 5):
            began = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (str(i),))
            conn.execute("COMMIT")
            commits.append(time.perf_counter() - began)
        conn.close()
    return {"fork_exit_ms": round(statistics.median(forks) * 1000.0, 3),
            "sqlite_commit_us": round(statistics.median(commits) * 1e6, 1)}
