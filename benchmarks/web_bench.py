"""Web view benchmarks (issue 14), against a real `ledger webserver` process over HTTP (keep-alive):

  timeline_page : GET /dags/DAG, the first page (newest 100 runs) of a DAG whose timeline holds 100,000 runs
                  (the HTML page, rendered on the server); the first request after start, and the median.
  timeline_api  : GET /api/v1/dags/DAG/timeline?limit=100, the first page of the same timeline as JSON.
  run_api       : GET /api/v1/runs/RUN for runs spread over that timeline: p50 and p99.

    python -m benchmarks.web_bench --existing 100000 --requests 500 --repeat 3
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_command, ledger_env, percentile, summarise
from benchmarks.backfill_bench import seed_timeline, write_dag


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(conn: http.client.HTTPConnection, path: str) -> float:
    """Milliseconds from sending the request to having read the whole body (status must be 200)."""
    began = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - began) * 1000
    if response.status != 200:
        raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
    return elapsed


def _wait_up(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ledger webserver exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("ledger webserver did not start within 30 s")


@contextmanager
def served(home: Path) -> Iterator[http.client.HTTPConnection]:
    """A keep-alive connection to a `ledger webserver` just started on the ledger in `home`."""
    port = _free_port()
    proc = subprocess.Popen([*ledger_command(), "webserver", "--port", str(port)], env=ledger_env(home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(port, proc)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        yield conn
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def one_round(home: Path, existing: int, requests: int) -> dict[str, float]:
    with served(home) as conn:
        first_page = _get(conn, "/dags/big")
        pages = [_get(conn, "/dags/big") for _ in range(20)]
        api_pages = [_get(conn, "/api/v1/dags/big/timeline?limit=100") for _ in range(20)]
        rng = random.Random(14)
        runs = [_get(conn, f"/api/v1/runs/{rng.randint(1, existing)}") for _ in range(requests)]
    pages.sort()
    return {"first_page_ms": first_page, "page_ms": pages[len(pages) // 2],
            "api_page_ms": sorted(api_pages)[len(api_pages) // 2],
            "run_p50_ms": percentile(runs, 50), "run_p99_ms": percentile(runs, 99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--existing", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        home = Path(tmp)
        write_dag(home, "big", "@hourly", 2000)
        db_upgrade(home)
        seed_timeline(home, args.existing)
        rounds = [one_round(home, args.existing, args.requests) for _ in range(args.repeat)]
    print(json.dumps({"benchmark": "web_timeline_page", "runs": args.existing, "page": 100, "repeat": args.repeat,
                      **summarise(rounds, "first_page_ms", 1), **summarise(rounds, "page_ms", 1),
                      **summarise(rounds, "api_page_ms", 1), "target_ms": 300}), flush=True)
    print(json.dumps({"benchmark": "web_run_api", "runs": args.existing, "requests": args.requests,
                      "repeat": args.repeat, **summarise(rounds, "run_p50_ms", 2), **summarise(rounds, "run_p99_ms", 2),
                      "target_p99_ms": 50}), flush=True)


if __name__ == "__main__":
    main()
