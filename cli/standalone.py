"""`ledger standalone`: a whole local stack from one command (the database, an admin user, the scheduler, the
webserver and, with --workers, Celery workers with a private redis-server), stopped together by Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated

import typer

from ledger.cli.options import DagsFolder, check_environment
from ledger.core.errors import InvalidInput

ADMIN = "admin"
BROKER_VARIABLE = "LEDGER_CELERY_BROKER_URL"
STOP_GRACE = 30.0  # seconds a component has to stop after SIGTERM before its process group is killed
STOP_ORDER = {"scheduler": 0, "worker": 1, "webserver": 2, "redis": 3}
READY_WITHIN = 60.0  # seconds the webserver and redis-server have to accept connections


def _say(component: str, line: str) -> None:
    typer.echo(f"{component:<10} | {line}")


@dataclass
class Component:
    """One process of the stack, in a process group of its own (so Ctrl-C reaches only `ledger standalone`, which
    stops each in order), its output relayed line by line under its name."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path | None = None  # where its output goes instead (a server's chatter)
    proc: subprocess.Popen[bytes] | None = None
    relay: threading.Thread | None = None

    def start(self) -> None:
        if self.log is not None:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(self.args, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            return
        self.proc = subprocess.Popen(self.args, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.relay = threading.Thread(target=self._relay, args=(self.proc.stdout,), daemon=True)
        self.relay.start()

    def _relay(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        for raw in iter(stream.readline, b""):
            _say(self.name, raw.decode(errors="replace").rstrip())

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to the component's process group (a scheduler ends its tries, a worker its pool); SIGKILL to the
        group after STOP_GRACE seconds or once the leader is gone, so that nothing of it stays behind."""
        if self.proc is None:
            return
        group = self.proc.pid
        if self.proc.poll() is None:
            _signal_group(group, signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                _say("standalone", f"{self.name} did not stop within {STOP_GRACE:.0f} s: killed")
        _signal_group(group, signal.SIGKILL)
        self.proc.wait()
        if self.relay is not None:
            self.relay.join(5)


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has no process left
        os.killpg(group, signum)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_ready(component: Component, port: int) -> None:
    """Until the component accepts connections on 127.0.0.1:port; one line and exit 1 if it exits first or does not
    within READY_WITHIN seconds."""
    deadline = time.monotonic() + READY_WITHIN
    while not _port_taken(port):
        if not component.running():
            raise InvalidInput(f"{component.name} exited before it listened on port {port} (its lines are above)")
        if time.monotonic() > deadline:
            raise InvalidInput(f"{component.name} did not listen on port {port} within {READY_WITHIN:.0f} s")
        time.sleep(0.1)


@dataclass
class Stack:
    components: list[Component] = field(default_factory=list)

    def add(self, component: Component) -> Component:
        self.components.append(component)
        component.start()
        assert component.proc is not None
        _say("standalone", f"{component.name} started (pid {component.proc.pid})")
        return component

    def stop(self) -> None:
        """The scheduler first (it sends no more tries and ends its own), then workers, the webserver, redis."""
        for component in sorted(self.components, key=lambda c: STOP_ORDER.get(c.name.partition("-")[0], 1)):
            if component.running():
                _say("standalone", f"stopping {component.name}")
            component.stop()

    def first_gone(self) -> Component | None:
        return next((c for c in self.components if not c.running()), None)


def _ledger(*args: str) -> list[str]:
    return [sys.executable, "-m", "ledger.cli.app", *args]


def _ensure_admin(out: Callable[[str], None]) -> None:
    """On a ledger with no users: an admin user with a random password, printed here once (it is stored only as
    its hash); a ledger that has users is left as it is."""
    from ledger.cli.env import open_env
    from ledger.services import users
    from ledger.store import users as user_store

    env = open_env()
    with env.transaction() as session:
        if user_store.count(session) > 0:
            return
        password = secrets.token_urlsafe(12)
        users.create(session, ADMIN, password, "admin", now=env.clock.now(), actor=env.actor)
    out(f"created the admin user {ADMIN!r} with password {password} (shown this once; stored only as a hash)")


def standalone(
    port: Annotated[int, typer.Option(min=1, max=65535, help="The webserver's port on 127.0.0.1.")] = 8793,
    workers: Annotated[int, typer.Option(min=0, max=64, help="Celery workers to start (then tries run on them, "
                                                             "through LEDGER_CELERY_BROKER_URL or a private "
                                                             "redis-server); 0: the LocalExecutor.")] = 0,
    dags_folder: DagsFolder = None,
) -> None:
    """Run a whole local stack: the scheduler, the webserver and optional Celery workers; Ctrl-C stops them all.

    Creates or upgrades the database, makes an admin user on first start (its password printed once), then shows
    each component's lines under its name. Everything listens on 127.0.0.1 only."""
    check_environment()
    home_env = dict(os.environ)
    if dags_folder is not None:
        home_env["LEDGER_DAGS_FOLDER"] = str(dags_folder.resolve())
    broker = home_env.get(BROKER_VARIABLE)
    if workers and not broker and shutil.which("redis-server") is None:
        raise InvalidInput(f"--workers needs a Celery broker: set {BROKER_VARIABLE}, or install redis-server for a "
                           "private one")
    if _port_taken(port):
        raise InvalidInput(f"port {port} on 127.0.0.1 is in use: give another with --port")
    from ledger.infra.config import load_settings

    settings = load_settings(dags_folder=dags_folder)
    settings.dags_folder.mkdir(parents=True, exist_ok=True)  # a new home's DAGs folder, to put DAG files in
    upgrade = subprocess.run(_ledger("db", "upgrade"), env=home_env, capture_output=True, text=True)
    for line in (upgrade.stdout + upgrade.stderr).splitlines():
        _say("db", line)
    if upgrade.returncode != 0:
        raise typer.Exit(1)
    _ensure_admin(lambda line: _say("standalone", line))

    stack = Stack()
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        exit_code = _run(stack, stopping, home_env, settings.home, port, workers, broker)
    finally:
        stack.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _say("standalone", "stopped")
    raise typer.Exit(exit_code)


def _run(stack: Stack, stopping: threading.Event, env: dict[str, str], home: Path, port: int, workers: int,
         broker: str | None) -> int:
    worker_token = secrets.token_urlsafe(24)  # this stack's: the webserver and its workers share it
    if workers and not broker:
        folder = home / "standalone" / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        redis_port = _free_port()
        redis = stack.add(Component("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                              "--dir", str(folder), "--appendonly", "yes", "--save", ""], env,
                                    log=folder / "redis.log"))
        _wait_ready(redis, redis_port)
        _say("standalone", f"redis ready on 127.0.0.1:{redis_port} (its log: {folder / 'redis.log'})")
        broker = f"redis://127.0.0.1:{redis_port}/0"
    if broker:
        env = {**env, BROKER_VARIABLE: broker}
    scheduler_args = ["scheduler"] + (["--executor", "celery"] if workers else [])
    stack.add(Component("scheduler", _ledger(*scheduler_args), env))
    web = stack.add(Component("webserver", _ledger("webserver", "--port", str(port)),
                              {**env, "LEDGER_WORKER_TOKEN": worker_token}))
    _wait_ready(web, port)
    _say("standalone", f"webserver ready: http://127.0.0.1:{port}/ (sign in as {ADMIN})")
    api = f"http://127.0.0.1:{port}"
    for number in range(1, workers + 1):
        stack.add(Component(f"worker-{number}", _ledger("worker", "--hostname", f"standalone-{number}"),
                            {**env, "LEDGER_API_URL": api, "LEDGER_WORKER_TOKEN": worker_token}))
    _say("standalone", "running; Ctrl-C stops everything")
    while not stopping.wait(0.5):
        gone = stack.first_gone()
        if gone is not None:
            assert gone.proc is not None
            _say("standalone", f"{gone.name} exited with status {gone.proc.returncode}; stopping the others")
            return 1
    return 0
