"""A local Celery deployment for the benchmarks: redis-server on a free loopback port, ledger's webserver on the
benchmark's home (where workers fetch code) and N `ledger worker` processes, each in a home of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks._common import ledger_command, ledger_env

TOKEN = "bench-worker-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"nothing listens on 127.0.0.1:{port} (exit status {proc.poll()})")
        time.sleep(0.05)


@contextlib.contextmanager
def celery_cluster(workdir: Path, home: Path, *, workers: int, concurrency: int) -> Iterator[dict[str, str]]:
    """Yields the scheduler's extra environment (the broker's URL) while redis, the webserver and the workers run."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        out = (workdir / f"{name}.out").open("wb")
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        out.close()
        procs.append(proc)
        return proc

    try:
        redis_port, web_port = _free_port(), _free_port()
        redis = start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                "--dir", str(workdir)], dict(os.environ))
        _wait_port(redis_port, redis)
        broker = f"redis://127.0.0.1:{redis_port}/0"
        web = start("webserver", [*ledger_command(), "webserver", "--port", str(web_port)],
                    ledger_env(home, LEDGER_WORKER_TOKEN=TOKEN))
        _wait_port(web_port, web)
        for i in range(workers):
            worker_home = workdir / f"worker{i}"
            worker_home.mkdir()
            env = {k: v for k, v in ledger_env(worker_home).items() if k != "LEDGER_DAGS_FOLDER"}
            env.update(LEDGER_CELERY_BROKER_URL=broker, LEDGER_API_URL=f"http://127.0.0.1:{web_port}",
                       LEDGER_WORKER_TOKEN=TOKEN)
            start(f"worker{i}", [*ledger_command(), "worker", "--hostname", f"bench{i}", "--concurrency",
                                 str(concurrency)], env)
        deadline = time.monotonic() + 60
        while not all("ready" in (workdir / f"worker{i}.out").read_text(errors="replace") for i in range(workers)):
            if time.monotonic() > deadline:
                raise SystemExit("the workers were not ready within 60 s")
            time.sleep(0.1)
        yield {"LEDGER_CELERY_BROKER_URL": broker}
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
