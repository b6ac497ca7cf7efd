"""Helpers shared by the benchmarks that drive the real `ledger` command line in a scratch LEDGER_HOME."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def ledger_command() -> list[str]:
    """The `ledger` console script of the running interpreter's environment (falls back to `python -m cli`)."""
    beside = Path(sys.executable).with_name("ledger")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ledger")
    if found:
        return [found]
    return [sys.executable, "-c", "from cli.app import run; run()"]


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
