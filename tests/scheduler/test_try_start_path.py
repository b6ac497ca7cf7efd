"""Fewer hops on the path from an upstream try's end to its downstream try's start (issue 40 part 7): a worker takes a
try's claim, its place in the running set and its lease in one round trip to Redis, and a pool process that stored a
try's outcome is free for its next try without waiting for the try's guard process to be scheduled to exit, nor for
the try's process to sync its report and exit once its log is whole (decision 0315); it stores the outcome, the rest
of the log and the try's exit from its worker's running set in one round trip (decision 0325), and leaves what waits
for the try's exit to a thread (decision 0326)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
import redis

from ledger.infra.workers import running_key
from ledger.scheduler.executors.celery_app import KEEP, CeleryConfig, claim_key, log_key, make_app
from ledger.scheduler.runtime import celery_worker, try_exits, try_process
from ledger.scheduler.runtime.try_delivery import LogRest, store_state
from ledger.scheduler.runtime.try_lease import TryLease, claim_with_lease, lease_key, lease_value
from ledger.scheduler.runtime.try_outbox import OutboxDrop
from ledger.scheduler.runtime.try_outcome import Outcome
from ledger.scheduler.runtime.try_process import RunningTry
from ledger.scheduler.runtime.try_report import TryReport
from tests.celery_cluster import RedisServer


def test_a_claim_takes_the_try_its_running_entry_and_its_lease_together_and_a_second_claim_gets_only_the_holder(
        redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    tid = "ledger-7-1"
    mine = lease_value("w1 i1", 11, None, 30.0)
    assert claim_with_lease(client, tid, (claim_key(tid), "w1 aaa", 60), running_key("w1"), mine, 30.0) is None
    assert client.get(claim_key(tid)) == b"w1 aaa" and 0 < client.ttl(claim_key(tid)) <= 60
    assert client.smembers(running_key("w1")) == {tid.encode()}
    assert client.get(lease_key(tid)) == mine.encode() and 0 < client.pttl(lease_key(tid)) <= 30_000

    other = lease_value("w2 i2", 12, None, 30.0)  # a redelivery on another worker: refused, nothing of it written
    assert claim_with_lease(client, tid, (claim_key(tid), "w2 bbb", 60), running_key("w2"), other, 30.0) == b"w1 aaa"
    assert client.get(lease_key(tid)) == mine.encode()
    assert client.smembers(running_key("w2")) == set()


def test_a_guard_that_cannot_be_forked_raises_and_leaves_no_pipe_open(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:
        ends = real_pipe()
        made.extend(ends)
        return ends

    def refused() -> int:  # (a pids limit reached)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(try_process.os, "pipe", pipe)
    monkeypatch.setattr(try_process.os, "fork", refused)
    with pytest.raises(BlockingIOError):
        try_process.GroupGuard(os.getpid())
    monkeypatch.undo()
    assert len(made) == 2
    for fd in made:  # (closed, and nothing in this process opened one since)
        with pytest.raises(OSError):
            os.fstat(fd)


def test_a_stopped_lease_does_not_wait_for_its_guard_to_exit_and_the_guard_is_reaped_once_it_has() -> None:
    group = subprocess.Popen(["sleep", "600"], start_new_session=True)  # the try's process group, left alone
    guard = try_process.GroupGuard(group.pid)
    pid = guard.pid
    os.kill(pid, signal.SIGSTOP)  # the guard cannot run (a busy host): it exits only once the test lets it
    lease = TryLease(None, "ledger-8-1", "{}", 30.0, lambda: None, os.getppid())
    lease.guard = guard
    stopped = threading.Event()
    threading.Thread(target=lambda: (lease.stop(), stopped.set()), daemon=True).start()
    try:
        assert stopped.wait(30), "stop() waited for a guard that had not exited"
        assert pid in try_process._unreaped
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while pid in try_process._unreaped:  # the guard, let go, exits without killing anything: reaped then
        assert time.monotonic() < deadline, "the released guard was never reaped"
        try_process.reap_guards()
        time.sleep(0.01)
    assert group.poll() is None  # (let go: it killed nothing)
    group.kill()
    group.wait()


def test_the_worker_command_loads_no_database_layer_so_each_try_forks_a_smaller_process() -> None:
    # `ledger worker`'s modules, as its CLI loads them (the Celery worker's when the command runs): its pool
    # processes fork every try, and what they hold is copied
    found = subprocess.run(
        [sys.executable, "-c", "import sys, ledger.cli.app, ledger.cli.worker, ledger.scheduler.runtime.celery_worker; "
                               "print(sorted(m for m in ('sqlalchemy', 'ledger.store', 'ledger.services', 'pydantic') "
                               "if m in sys.modules))"],
        capture_output=True, text=True, check=True, timeout=120)
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def a_try_that_left_its_report(tmp_path: Path, *, settles: bool) -> tuple[RunningTry, OutboxDrop, int]:
    """A forked process standing for a Celery try whose code has ended: it leaves its report in an outbox, says its
    log is whole (`settles`), then waits until the test writes to the returned pipe before it exits."""
    log = str(tmp_path / "try_1.log")
    drop = OutboxDrop(tmp_path / "outbox", "ledger-9-1", log, "i1", "w1")
    release_r, release_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            drop.leave(TryReport("success", None, 1.0, log, "w1", pushed=(("return_value", 7),)))
            if settles:
                drop.settle()
            os.read(release_r, 1)
            code = 0
        finally:
            os._exit(code)
    os.close(result_w)
    os.close(release_r)
    os.set_blocking(result_r, False)
    try:
        drop.forked()
    except BaseException:  # (nothing will release it)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    item: Any = types.SimpleNamespace(execution_timeout=None, log_path=log)
    return RunningTry(item, pid, result_r, 0.0, drop), drop, release_w


def test_a_celery_tries_report_is_taken_once_its_log_is_whole_while_its_process_still_exits(tmp_path: Path) -> None:
    running, drop, release = a_try_that_left_its_report(tmp_path, settles=True)
    try:
        deadline = time.monotonic() + 30
        while (end := celery_worker._end_of(running, drop, 1.0)) is None:
            assert time.monotonic() < deadline, "the report its process said was whole was never taken"
        assert isinstance(end, TryReport) and end.state == "success" and end.pushed == (("return_value", 7),)
        assert running.outcome is None and not running._exited()  # (it waits on the test: it has not exited)
    finally:
        os.write(release, b"x")
        os.close(release)
        drop.close()
    assert running.wait().state == "success"


def test_a_celery_try_that_never_said_its_log_is_whole_is_taken_when_its_process_has_exited(tmp_path: Path) -> None:
    running, drop, release = a_try_that_left_its_report(tmp_path, settles=False)
    try:
        assert celery_worker._end_of(running, drop, 0.2) is None  # (its report is there, but not its log's end)
    finally:
        os.write(release, b"x")
        os.close(release)
    deadline = time.monotonic() + 30
    while (end := celery_worker._end_of(running, drop, 1.0)) is None:
        assert time.monotonic() < deadline, "the try's exit was never seen"
    drop.close()
    assert isinstance(end, Outcome) and end.state == "success" and running.report is not None


def test_a_finished_tries_guard_holds_until_it_is_let_go_then_exits_without_killing() -> None:
    group = subprocess.Popen(["sleep", "600"], start_new_session=True)  # the try's process group
    lease = TryLease(None, "ledger-10-1", "{}", 30.0, lambda: None, os.getppid())
    lease.guard = guard = try_process.GroupGuard(group.pid)
    pid = guard.pid
    try:
        lease.finished()  # (its outcome is being delivered: a guard woken now would take the CPU from it)
        assert guard._write_fd >= 0, "the guard was let go as the try finished, before its outcome was stored"
        lease.let_guard_go()
        assert guard._write_fd < 0
        lease.stop()
        deadline = time.monotonic() + 30
        while pid in try_process._unreaped:  # (let go, it exits by itself: reaped then)
            assert time.monotonic() < deadline, "the released guard was never reaped"
            try_process.reap_guards()
            time.sleep(0.01)
        assert group.poll() is None  # (let go: it killed nothing)
    finally:
        group.kill()
        group.wait()


def test_a_stored_state_comes_with_its_logs_rest_and_its_exit_from_the_running_set_and_never_replaces_a_success(
        redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    backend = make_app(CeleryConfig(redis_server.url, redis_server.url)).backend
    tid = "ledger-11-1"
    client.sadd(running_key("w1"), tid, "ledger-12-1")
    client.set(log_key(tid), b"first line\n")
    heard = client.pubsub()
    heard.subscribe(backend.get_key_for_task(tid))
    deadline = time.monotonic() + 30
    while (confirmed := heard.get_message(timeout=1.0)) is None:  # (Redis has the subscription before the store)
        assert time.monotonic() < deadline, "the subscription was never confirmed"
    assert confirmed["type"] == "subscribe"

    assert store_state(client, backend, tid, "SUCCESS", {"state": "success", "log_bytes": 20},
                       log=LogRest(11, b"last line\n"), running_set=running_key("w1"))
    meta = backend.decode_result(client.get(backend.get_key_for_task(tid)))
    assert meta["status"] == "SUCCESS" and meta["result"] == {"state": "success", "log_bytes": 20}
    assert 0 < client.ttl(backend.get_key_for_task(tid)) <= KEEP
    assert client.get(log_key(tid)) == b"first line\nlast line\n" and 0 < client.ttl(log_key(tid)) <= KEEP
    assert client.smembers(running_key("w1")) == {b"ledger-12-1"}
    deadline = time.monotonic() + 30
    while (message := heard.get_message(timeout=1.0)) is None:  # published, as Celery's store publishes a state
        assert time.monotonic() < deadline, "the stored state was not published"
    assert backend.decode_result(message["data"])["status"] == "SUCCESS"

    # delivered again (a guard, the next incarnation's beat) or a late STARTED: a SUCCESS stays as it was
    assert not store_state(client, backend, tid, "STARTED", {"host": "w1"}, log=LogRest(0, b"masked\n", whole=True))
    assert backend.decode_result(client.get(backend.get_key_for_task(tid)))["status"] == "SUCCESS"
    assert client.get(log_key(tid)) == b"masked\n"  # (a log rewritten whole replaces what was sent)


def test_a_delivered_tries_guard_and_outbox_file_wait_for_its_process_to_exit_while_its_pool_process_goes_on(
        tmp_path: Path) -> None:
    running, drop, release = a_try_that_left_its_report(tmp_path, settles=True)
    group = subprocess.Popen(["sleep", "600"], start_new_session=True)  # stands for the try's group, for its guard
    lease = TryLease(None, "ledger-9-1", "{}", 30.0, lambda: None, os.getppid())
    lease.guard = guard = try_process.GroupGuard(group.pid)
    done = threading.Event()
    then = celery_worker._after_exit(lease, drop.path)
    try:
        drop.close()

        def after() -> None:
            then()
            done.set()

        try_exits.after_exit(running, after)  # (returns at once: the process still runs)
        assert not done.wait(0.2) and running.outcome is None
        assert guard._write_fd >= 0 and drop.path.exists()  # guarded, its outcome kept, while its process lives
    finally:
        os.write(release, b"x")
        os.close(release)
    try:
        assert done.wait(30), "what follows the try's exit was never done"
        assert running.outcome is not None and running.outcome.state == "success"  # reaped
        assert guard._write_fd < 0 and not drop.path.exists()  # let go, then the file removed
    finally:
        group.kill()
        group.wait()
