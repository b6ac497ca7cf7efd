"""Real parts for the Celery executor's tests: a redis-server on a private loopback port, ledger's webserver (where
workers fetch code) and `ledger worker` processes, each in a LEDGER_HOME of its own with no DAGs folder.

`redis_server` skips when redis-server is not installed, except with CI=true, where it fails (.ci/run installs it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.executors.celery import CeleryExecutor
from tests import launcher
from tests.conftest import LEDGER, REPO, _clean_env, copy_migrated
from tests.scheduler.test_task_runner import write_dag_file

BROKER = "LEDGER_CELERY_BROKER_URL"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, within: float = 60.0, proc: subprocess.Popen[Any] | None = None) -> None:
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process for {host}:{port} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {host}:{port} after {within} s")
        time.sleep(0.05)


# a try's lease (and a worker's heartbeat timeout) in the tests: long enough that a supervisor starved of CPU on a
# loaded machine never fences a healthy try (a death is seen at once through the guard and the lease's word, not
# by expiry); a test about expiry passes its own, shorter one
LEASE = "10"

@dataclass
class RedisServer:
    folder: Path
    port: int = 0
    binds: tuple[str, ...] = ("127.0.0.1",)
    proc: subprocess.Popen[bytes] | None = None
    users: tuple[tuple[str, str], ...] = ()  # (name, password): users of every right, made again at every start

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or start again) on the same port, with an append-only file: a restart keeps what it held."""
        self.port = self.port or free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 (kept open by the server process)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", *self.binds, "--dir", str(self.folder),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no",
             *(arg for name, password in self.users for arg in ("--user", name, "on", f">{password}", "~*", "&*",
                                                                  "+@all"))],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        wait_for_port("127.0.0.1", self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def flush(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url)
        client.flushall()
        client.close()


def require_redis() -> None:
    """Skip the test without redis-server, except in CI (CI=true), where .ci/run installs it: fail there."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (.ci/run installs it)")
        pytest.skip("redis-server is not installed")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    require_redis()
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(home), PYTHONPATH=str(REPO), NO_COLOR="1", COLUMNS="200", **extra)
    return env


@dataclass
class Processes:
    """Processes a test started, each in its own process group, all stopped at the end."""

    folder: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)

    def start(self, name: str, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        path = self.folder / f"{name}.log"
        out: IO[bytes] = open(path, "ab")  # noqa: SIM115 (the child writes to it)
        proc = launcher.popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        out.close()
        self.started.append(proc)
        self.logs[proc.pid] = path
        return proc

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        return self.logs[proc.pid].read_text(errors="replace")

    @staticmethod
    def kill9(proc: subprocess.Popen[bytes]) -> None:
        """kill -9 of the process and everything in its process group (a worker's pool and its tries)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(RuntimeError):  # (a warm interpreter gone before it could tell the status)
            proc.wait(10)

    @staticmethod
    def _running(proc: subprocess.Popen[bytes]) -> bool:
        try:
            return proc.poll() is None
        except RuntimeError:  # its warm interpreter has gone (tests/launcher.py): its group may still run
            return True

    def stop_all(self) -> None:
        for proc in self.started:
            if self._running(proc):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.started:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except (subprocess.TimeoutExpired, RuntimeError):
                self.kill9(proc)
        for proc in self.started:  # what a process left in its group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class Cluster:
    """A scheduler's LEDGER_HOME (`home`, with the database and the DAGs folder), redis, the webserver, workers."""

    home: Path
    redis: RedisServer
    procs: Processes
    token: str = "worker-secret"
    web_port: int = 0
    web_host: str = "127.0.0.1"

    @property
    def api_url(self) -> str:
        return f"http://{self.web_host}:{self.web_port}"

    def scheduler_env(self, **extra: str) -> dict[str, str]:
        return _env(self.home, **{BROKER: self.redis.url, "LEDGER_WORKER_HEARTBEAT_TIMEOUT": LEASE,
                                  "LEDGER_VERIFY_MEMORY": "1", **extra})

    def start_webserver(self, host: str = "127.0.0.1", port: int = 0, within: float = 60.0,
                        **extra: str) -> subprocess.Popen[bytes]:
        self.web_port, self.web_host = port or free_port(host), host
        proc = self.procs.start("webserver", [LEDGER, "webserver", "--host", host, "--port", str(self.web_port)],
                                _env(self.home, LEDGER_WORKER_TOKEN=self.token, **{BROKER: self.redis.url},
                                     **extra), self.home)
        wait_for_port(host, self.web_port, within, proc=proc)
        return proc

    def start_worker(self, name: str, *, queues: str = "default", concurrency: int = 2,
                     prefix: tuple[str, ...] = (), broker: str | None = None,
                     api_url: str | None = None, named: bool = True, home: Path | None = None,
                     wait: bool = True, label: str | None = None, args: tuple[str, ...] = (),
                     **extra: str) -> subprocess.Popen[bytes]:
        """A worker in a LEDGER_HOME of its own (no DAGs folder, no database; or `home`); waits until it beats
        as `name` (`named`: started with `--hostname name`, else with no --hostname; `args` added to its command
        line); its output in `<label>.log` (by default worker-<name>.log)."""
        home = home or self.home.parent / f"worker-{name}"
        home.mkdir(exist_ok=True)
        env = _env(home, **{BROKER: broker or self.redis.url, "LEDGER_API_URL": api_url or self.api_url,
                            "LEDGER_WORKER_TOKEN": self.token, "LEDGER_WORKER_HEARTBEAT_TIMEOUT": LEASE, **extra})
        named_as = ("--hostname", name) if named else ()
        proc = self.procs.start(label or f"worker-{name}", [*prefix, LEDGER, "worker", *named_as, "--queues", queues,
                                                             "--concurrency", str(concurrency), *args], env, home)
        if wait:
            self.wait_for_worker(name, proc)
        return proc

    def wait_for_worker(self, name: str, proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
        """Until the worker beats and its Celery consumer is ready."""
        import redis

        client = redis.Redis.from_url(self.redis.url)
        deadline = time.monotonic() + within
        try:
            while not (client.exists(f"ledger:worker:{name}") and "ready" in self.procs.output(proc)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {name} did not start:\n{self.procs.output(proc)}")
                time.sleep(0.05)
        finally:
            client.close()

    def worker_home(self, name: str) -> Path:
        return self.home.parent / f"worker-{name}"


@pytest.fixture
def cluster(tmp_path: Path, redis_server: RedisServer, migrated_sqlite: Path) -> Iterator[Cluster]:
    """A migrated scheduler home with redis running; the test starts the webserver and workers it needs."""
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    copy_migrated(migrated_sqlite, home / "ledger.db")
    procs = Processes(tmp_path)
    made = Cluster(home, redis_server, procs)
    yield made
    procs.stop_all()


class PinnedCelery(CeleryExecutor):
    """The CeleryExecutor, with the contract's work items naming the version the demo DAG was registered as (the
    worker fetches that version's code from the webserver, as it does for a scheduler's tries)."""

    version = ""

    def submit(self, item: WorkItem) -> None:
        super().submit(dataclasses.replace(item, dag_version=self.version))


@pytest.fixture(scope="module")
def celery_demo(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Iterator[tuple[Cluster, str]]:
    """Once per module: redis, a home whose database holds the demo DAG's version, its webserver, one worker."""
    require_redis()
    root = tmp_path_factory.mktemp("celery")
    redis = RedisServer(root / "redis")
    cluster = Cluster(root / "home", redis, Processes(root))
    try:
        redis.start()
        home = cluster.home
        (home / "dags").mkdir(parents=True)
        copy_migrated(migrated_sqlite, home / "ledger.db")
        write_dag_file(root)  # (its module-level code writes beside it, in `root`)
        (home / "dags" / "demo_dag.py").write_text((root / "demo_dag.py").read_text())
        listed = launcher.run([LEDGER, "dags", "list", "--json"], env=_clean_env(home), capture_output=True,
                              text=True, check=True, cwd=home)
        version = next(d["version"] for d in json.loads(listed.stdout) if d["dag_id"] == "demo")
        cluster.start_webserver()
        cluster.start_worker("contract", concurrency=2)
        yield cluster, version
    finally:
        cluster.procs.stop_all()
        redis.stop()
