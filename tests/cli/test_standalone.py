"""`ledger standalone` as a user starts it: one command brings the database, an admin user, the scheduler, the
webserver (and workers with their redis-server) up, runs a DAG, and Ctrl-C leaves nothing running."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import launcher
from tests.celery_cluster import require_redis
from tests.conftest import LEDGER, _clean_env

pytestmark = pytest.mark.slow

DAG = '''\
import pendulum

from ledger import DAG, BashTask

with DAG("hello", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashTask("say", "echo hello from $LEDGER_TASK_ID")
'''
READY = "running; Ctrl-C stops everything"
WITHIN = 120.0  # seconds: a loud deadline for what must happen, never a pause


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Standalone:
    """`ledger standalone` in the background, its lines read as they come."""

    started: list[Standalone] = []

    def __init__(self, home: Path, *args: str) -> None:
        Standalone.started.append(self)
        self.env = _clean_env(home)
        self.proc = subprocess.Popen([LEDGER, "standalone", *args], env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WITHIN
        while True:
            try:
                line = self._new.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {WITHIN} s:\n" + "\n".join(self.lines)) from None
            if line is None:
                raise AssertionError(f"standalone ended before {text!r}:\n" + "\n".join(self.lines))
            self.lines.append(line)
            if text in line:
                return line

    def ctrl_c(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(WITHIN)
        while (line := self._new.get(timeout=WITHIN)) is not None:
            self.lines.append(line)
        return code

    def pids(self) -> dict[str, int]:
        found = (re.search(r"\| (\S+) started \(pid (\d+)\)", line) for line in self.lines)
        return {m.group(1): int(m.group(2)) for m in found if m}

    def ledger(self, *args: str) -> str:
        done = launcher.run([LEDGER, *args], env=self.env, capture_output=True, text=True, timeout=WITHIN)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone: it only waits for its parent to read its status
        return stat.read().rpartition(")")[2].split()[0] != "Z"


def run_succeeds(stack: Standalone, run_id: str) -> None:
    deadline = time.monotonic() + WITHIN
    while json.loads(stack.ledger("runs", "show", run_id, "--json"))["state"] != "success":
        assert time.monotonic() < deadline, f"run {run_id} did not succeed within {WITHIN} s:\n" + "\n".join(
            stack.lines)
        time.sleep(0.2)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "hello.py").write_text(DAG)
    yield home
    for stack in Standalone.started:  # a test that failed half-way stops its stack as a user would
        if stack.proc.poll() is None:
            stack.ctrl_c()
    Standalone.started.clear()


def test_one_command_runs_the_stack_makes_an_admin_once_and_ctrl_c_leaves_nothing_running(home: Path) -> None:
    port = free_port()
    stack = Standalone(home, "--port", str(port))
    password = re.search(r"created the admin user 'admin' with password (\S+)", stack.wait_for("admin user"))
    assert password is not None
    stack.wait_for(READY)
    assert set(stack.pids()) == {"scheduler", "webserver"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/login") as page:  # the webserver answers
        assert page.status == 200
    login = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/dags", headers={"Accept": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:  # users exist: reading needs one
        urllib.request.urlopen(login)
    assert refused.value.code == 401

    run = re.search(r"created manual run (\d+)", stack.ledger("trigger", "hello"))
    assert run is not None
    run_succeeds(stack, run.group(1))

    assert stack.ctrl_c() == 0
    assert stack.lines[-1].endswith("| stopped")
    assert [name for name, pid in stack.pids().items() if alive(pid)] == []

    again = Standalone(home, "--port", str(port))  # the second start: same database, no second admin
    again.wait_for(READY)
    assert again.ctrl_c() == 0
    assert not any("password" in line for line in again.lines)
    assert any("is already at revision" in line for line in again.lines)


def test_workers_run_the_tries_through_a_private_redis_and_stop_with_it(home: Path) -> None:
    require_redis()
    stack = Standalone(home, "--port", str(free_port()), "--workers", "1")
    stack.wait_for(READY)
    stack.wait_for("ledger worker standalone-1 ready")
    assert set(stack.pids()) == {"redis", "scheduler", "webserver", "worker-1"}
    run = re.search(r"created manual run (\d+)", stack.ledger("trigger", "hello"))
    assert run is not None
    run_succeeds(stack, run.group(1))
    tries = json.loads(stack.ledger("runs", "show", run.group(1), "--json"))["task_instances"]
    assert [t["tries"][-1]["hostname"] for t in tries] == ["standalone-1"]
    assert stack.ctrl_c() == 0
    assert [name for name, pid in stack.pids().items() if alive(pid)] == []


def test_a_taken_port_is_one_line_and_starts_nothing(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([LEDGER, "standalone", "--port", str(port)], env=_clean_env(home),
                              capture_output=True, text=True, timeout=WITHIN)
    assert done.returncode == 1
    assert done.stderr.strip() == f"Error: port {port} on 127.0.0.1 is in use: give another with --port"
    assert not (home / "ledger.db").exists()
