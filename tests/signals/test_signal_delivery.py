"""Delivery: listeners in other processes hear signals at once, catch up after being down, and get all
of a storm; on SQLite (doorbell sockets) and PostgreSQL (LISTEN/NOTIFY)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime
from multiprocessing.connection import wait
from pathlib import Path
from typing import IO, Any

import pytest
from sqlalchemy import create_engine

from ledger.core.signals import Signal
from ledger.services.signal_delivery import SocketDoorbell, doorbell_folder, open_doorbell, ring, ring_folder
from ledger.store import signals as store
from tests.conftest import REPO, Cli
from tests.signals.conftest import Db


class Proc:
    """A helper process (tests.signals.listener or .sender) whose JSON stdout lines are read by a thread."""

    def __init__(self, db: Db, module: str, *args: str) -> None:
        self.stderr: IO[str] = open(db.home / f"{module}-{time.monotonic_ns()}.err", "w+")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", f"tests.signals.{module}", *args], cwd=REPO,
                                     env=db.env(), stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.done: int | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def take(self, n: int, timeout: float = 60) -> list[dict[str, Any]]:
        """The next `n` signals it printed (other lines are noted and skipped)."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"got {len(got)} of {n} signals in {timeout} s; "
                                     f"stderr:\n{self.errors()}") from None
            if "done" in line:
                self.done = line["done"]
            elif "id" in line:
                got.append(line)
        return got

    def drain(self) -> list[dict[str, Any]]:
        got = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return got
            if "done" in line:
                self.done = line["done"]
            elif "id" in line:
                got.append(line)

    def wait(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout)  # it ends at the end of the process's stdout: every line it printed is queued
        return code

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(30)
        self.stderr.close()


@contextlib.contextmanager
def listener(db: Db, name: str, keys: list[str], *args: str) -> Any:
    proc = Proc(db, "listener", name, *keys, *args)
    try:
        yield proc
    finally:
        proc.stop()


def cursors(db: Db, name: str, keys: list[str]) -> dict[str, int]:
    with db.sessions.begin() as s:
        return store.cursors(s, name, keys)


def wait_for(condition: Any, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_listener_in_another_process_is_woken_by_a_cli_signal_not_by_its_poll(db: Db) -> None:
    """Its poll is 600 s, counted from its last wake: a signal heard within 30 s of its send, seconds after the
    signal before it was heard, was rung in. How soon it hears one is benchmarks/signal_latency.py's measure,
    not a bound here, where the machine's load would decide it."""
    cli = Cli(home=db.home, env=db.env())
    with listener(db, "waker", ["wake.up"], "--poll", "600") as proc:  # only a ring can wake it early
        cli.ok("signal", "send", "wake.up", "warm-up")
        [first] = proc.take(1)
        assert first["value"] == "warm-up"  # it is in its loop, its doorbell open
        heard = first["received"]
        if db.dialect == "sqlite":
            assert len(list(doorbell_folder(db.home).glob("*.sock"))) == 1
        for n in range(3):
            cli.ok("signal", "send", "wake.up", f"now {n}")
            [got] = proc.take(1, timeout=30)
            latency = got["received"] - datetime.fromisoformat(got["sent_at"]).timestamp()
            assert got["value"] == f"now {n}" and got["version"] == n + 2
            assert latency < 30 and got["received"] - heard < 600, f"heard after {latency:.2f} s"
            heard = got["received"]
        proc.stop()
        assert proc.proc.returncode == 0, proc.errors()
    if db.dialect == "sqlite":  # a listener that ends removes its doorbell
        assert list(doorbell_folder(db.home).glob("*.sock")) == []


def test_a_listener_that_was_down_gets_every_signal_it_missed_in_order(db: Db) -> None:
    service = db.service()
    keys = ["miss.a", "miss.b"]
    service.send("miss.a", "before", sender="test")
    with listener(db, "restarter", keys) as first:
        assert [s["value"] for s in first.take(1)] == ["before"]
        wait_for(lambda: cursors(db, "restarter", keys) == {"miss.a": 1, "miss.b": 0}, what="the cursor")
        first.stop(signal.SIGKILL)  # down without warning
    missed = 30
    for start in range(0, missed, 10):  # three transactions, interleaving the keys
        service.send_many([(keys[i % 2], f"missed {i}", None) for i in range(start, start + 10)], sender="test")
    assert cursors(db, "restarter", keys) == {"miss.a": 1, "miss.b": 0}
    with listener(db, "restarter", keys, "--exit-after", str(missed)) as second:
        got = second.take(missed)
        assert second.wait() == 0, second.errors()
        assert second.drain() == [] and second.done == missed
    assert [s["value"] for s in got] == [f"missed {i}" for i in range(missed)]
    assert [s["version"] for s in got if s["key"] == "miss.a"] == list(range(2, 17))
    assert [s["version"] for s in got if s["key"] == "miss.b"] == list(range(1, 16))
    assert cursors(db, "restarter", keys) == {"miss.a": 16, "miss.b": 15}


def test_two_processes_of_one_listener_never_deliver_the_same_signal_twice(db: Db) -> None:
    service = db.service()
    with listener(db, "pair", ["pair.k"], "--pause", "0.02", "--poll", "0.5") as a, \
            listener(db, "pair", ["pair.k"], "--pause", "0.02", "--poll", "0.5") as b:
        for i in range(20):
            service.send_many([("pair.k", f"{i}-{j}", None) for j in range(10)], sender="test")
            time.sleep(0.02)
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while len(got) < 200 and time.monotonic() < deadline:
            got += a.drain() + b.drain()
            time.sleep(0.05)
        a.stop()  # both ended, and everything they printed read: a duplicate either came or never will
        b.stop()
        got += a.drain() + b.drain()
    versions = sorted(s["version"] for s in got)
    assert versions == list(range(1, 201)), f"{len(versions)} delivered, {len(set(versions))} distinct"
    assert cursors(db, "pair", ["pair.k"]) == {"pair.k": 200}


@pytest.mark.slow
def test_a_storm_of_ten_thousand_signals_from_two_processes_is_stored_and_heard_without_gaps(db: Db) -> None:
    keys = [f"storm.{i}" for i in range(4)]
    with listener(db, "storm", keys, "--exit-after", "10000", "--poll", "5") as heard:
        batched = Proc(db, "sender", "5000", *keys, "--batch", "100", "--tag", "A")
        single = Proc(db, "sender", "5000", *keys, "--batch", "1", "--tag", "B")
        try:
            assert batched.wait(timeout=300) == 0, batched.errors()
            assert single.wait(timeout=300) == 0, single.errors()
        finally:
            batched.stop()
            single.stop()
        got = heard.take(10000, timeout=120)
        assert heard.wait() == 0, heard.errors()
    with db.sessions.begin() as s:
        stored = store.listing(s)
    assert len(stored) == 10000
    per_key: dict[str, list[Signal]] = defaultdict(list)
    for sig in stored:
        per_key[sig.key].append(sig)
    for key, signals in per_key.items():
        assert sorted(x.version for x in signals) == list(range(1, len(signals) + 1)), key
        assert [x.version for x in signals] == sorted(x.version for x in signals)  # id order is version order
        for tag in "AB":  # each sender's signals of a key in the order it sent them
            ns = [int(x.value.split(":")[1]) for x in signals if x.value.startswith(tag)]
            assert ns == sorted(ns) and len(ns) == 1250
    assert [(g["key"], g["version"]) for g in got] == [(x.key, x.version) for x in stored]
    assert cursors(db, "storm", keys) == {k: len(v) for k, v in per_key.items()}


# -- the service in this process -----------------------------------------------------------------------


def test_delivery_is_at_least_once_a_watcher_that_fails_gets_the_same_signals_again(db: Db) -> None:
    service = db.service()
    sent = service.send_many([("once.k", str(i), None) for i in range(3)], sender="test")

    def fails(batch: list[Signal]) -> None:
        raise RuntimeError("watcher broke")

    with pytest.raises(RuntimeError, match="watcher broke"):
        service.listen("flaky", ["once.k"], fails, timeout=5)
    assert cursors(db, "flaky", ["once.k"]) == {"once.k": 0}
    got: list[Signal] = []
    service.listen("flaky", ["once.k"], got.extend, timeout=0.3)
    assert got == sent
    service.listen("flaky", ["once.k"], got.extend, timeout=0.3)
    assert got == sent  # nothing twice once it was delivered
    assert cursors(db, "flaky", ["once.k"]) == {"once.k": 3}


def test_listen_returns_soon_after_stop_is_set_and_hears_signals_sent_meanwhile(db: Db) -> None:
    service = db.service()
    stop = threading.Event()
    got: list[Signal] = []

    def watcher(batch: list[Signal]) -> None:
        got.extend(batch)
        if len(got) >= 2:
            stop.set()

    # a poll interval of ten minutes: a listener that waited for it instead of its doorbell or its stop would still
    # be alive at each join's deadline, however busy the machine
    thread = threading.Thread(target=lambda: service.listen("stoppable", ["s.k"], watcher, stop=stop,
                                                            poll_interval=600))
    thread.start()
    service.send("s.k", "one", sender="test")
    service.send("s.k", "two", sender="test")
    thread.join(timeout=60)
    assert not thread.is_alive() and [s.value for s in got] == ["one", "two"]
    stop.clear()
    thread = threading.Thread(target=lambda: service.listen("stoppable", ["s.k"], watcher, stop=stop,
                                                            poll_interval=600))
    thread.start()
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_listen_refuses_bad_arguments(db: Db) -> None:
    from ledger.core.errors import InvalidInput

    service = db.service()
    for kwargs in ({"listener": "", "keys": ["k"]}, {"listener": "L", "keys": []},
                   {"listener": "L", "keys": ["bad key"]}):
        with pytest.raises(InvalidInput):
            service.listen(watcher=lambda batch: None, timeout=0.1, **kwargs)  # type: ignore[arg-type]


def test_a_ring_wakes_every_doorbell_and_removes_dead_ones(tmp_path: Path) -> None:
    home = tmp_path / "h" / ("long-" * 25)  # longer than a Unix socket address can hold
    one, two = SocketDoorbell(home), SocketDoorbell(home)
    folder = doorbell_folder(home)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    folder_fd = os.open(folder, os.O_RDONLY)
    dead.bind(f"/proc/self/fd/{folder_fd}/dead.sock")  # bound, then closed without removing its file:
    dead.close()  # as if its process had died
    os.close(folder_fd)
    assert len(str(folder / "dead.sock")) > 108 and (folder / "dead.sock").exists()
    assert wait([one.handle(), two.handle()], timeout=0) == []
    assert ring_folder(folder) == 2
    assert set(wait([one.handle(), two.handle()], timeout=30)) == {one.handle(), two.handle()}
    assert not (folder / "dead.sock").exists()
    for _ in range(50):  # a full queue does not block the sender
        ring_folder(folder)
    one.drain()
    assert wait([one.handle()], timeout=0) == []
    one.close()
    two.close()
    assert list(folder.iterdir()) == []
    ring_folder(tmp_path / "nowhere")  # no folder, no doorbells, no error


def test_a_doorbell_made_after_the_folder_was_listed_is_rung(tmp_path: Path) -> None:
    """Rings reuse the folder's listing while the folder is unchanged; a new doorbell changes it."""
    one = SocketDoorbell(tmp_path)
    folder = doorbell_folder(tmp_path)
    past = time.time() - 5
    os.utime(folder, (past, past))  # the listing below is taken well after the folder's last change
    assert ring_folder(folder) == 1
    assert ring_folder(folder) == 1  # (from the listing kept)
    two = SocketDoorbell(tmp_path)
    assert ring_folder(folder) == 2
    assert set(wait([one.handle(), two.handle()], timeout=30)) == {one.handle(), two.handle()}
    one.close()
    two.close()
    assert ring_folder(folder) == 0


def test_a_job_does_not_ring_its_own_doorbell(tmp_path: Path) -> None:
    own, other = SocketDoorbell(tmp_path), SocketDoorbell(tmp_path)
    try:
        ring(create_engine(f"sqlite:///{tmp_path / 'ledger.db'}"), tmp_path, skip=own)
        assert wait([own.handle(), other.handle()], timeout=30) == [other.handle()]
    finally:
        own.close()
        other.close()


def test_ring_never_raises(db: Db, tmp_path: Path) -> None:
    ring(db.engine, tmp_path / "does-not-exist")
    (tmp_path / "file").write_text("x")
    ring(db.engine, tmp_path / "file")  # the "home" is a file: nothing to ring, and no error


@pytest.mark.postgres
def test_on_postgres_the_doorbell_rings_when_a_send_commits_and_not_when_it_rolls_back(migrated_postgres_url: str,
                                                                                         tmp_path: Path) -> None:
    from tests.conftest import sessions_on

    engine, sessions = sessions_on(migrated_postgres_url)
    with open_doorbell(engine, tmp_path) as bell:
        with pytest.raises(RuntimeError), sessions.begin() as s:
            store.send(s, "pg.k", "rolled back", sender="t", now=datetime.now().astimezone())
            raise RuntimeError("abort")
        assert wait([bell.handle()], timeout=0.5) == []
        with sessions.begin() as s:
            store.send(s, "pg.k", "kept", sender="t", now=datetime.now().astimezone())
            assert wait([bell.handle()], timeout=0.3) == []  # not before commit
        assert wait([bell.handle()], timeout=30) == [bell.handle()]
        bell.drain()
        assert wait([bell.handle()], timeout=0.3) == []
        # a broken LISTEN connection wakes the sleeper; draining reconnects and it rings again
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE query = 'LISTEN ledger_signals'")
        assert wait([bell.handle()], timeout=30)
        bell.drain()
        with sessions.begin() as s:
            store.send(s, "pg.k", "after reconnect", sender="t", now=datetime.now().astimezone())
        assert wait([bell.handle()], timeout=30) == [bell.handle()]
    engine.dispose()
