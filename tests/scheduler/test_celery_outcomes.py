"""A try that ran to its end is recorded as it ended, whatever Redis or the worker does after its code ran (issue 40,
decision 0257): the worker keeps its outcome on its own disk from the moment the try's process exits until Redis
takes it, its next incarnation delivers what it kept, a lease that cannot be renewed never fences a try that has
exited, and the scheduler waits for a kept outcome before it records a try lost.

Redis refuses what the test wants it to refuse with an ACL: the worker reaches Redis as a user of its own, allowed to
read every key but not to write the tries' states (`celery-task-meta-*`), until the test allows it again. Both sides
of each race are the test's: the try waits for the file `go`."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.executors.celery import ADOPTION_CLAIM, LEASE_GRACE, OUTCOME_PATIENCE, CeleryExecutor
from ledger.scheduler.executors.celery_app import CeleryConfig, claim_key, log_key, task_id
from ledger.scheduler.runtime import try_outbox
from ledger.scheduler.runtime.try_lease import TryLease, dead_value, lease_key, taken_value
from ledger.scheduler.runtime.try_process import RunningTry
from ledger.scheduler.runtime.try_report import TryReport
from tests.celery_cluster import Cluster, RedisServer, free_port
from tests.chaos.faults import children
from tests.scheduler.slow_stream import SLOW_STREAM
from tests.scheduler.test_celery_executor import ledger, tries, wait_until, write_dag
from tests.scheduler.test_celery_faults import (
    FakeClock,
    dead,
    finished,
    lines,
    parent_of,
    ran,
    start_scheduler,
    started_try,
    traced_dag,
)
from tests.scheduler.test_celery_queued_timeout import wait_for
from tests.scheduler.test_celery_sending import items

pytestmark = pytest.mark.timeout(240)

USER, PASSWORD = "worker", "worker-secret"
STATES = "celery-task-meta-*"


def refuse_states(cluster: Cluster) -> str:
    """The worker's user: reads every key, writes every key but the tries' states; its broker URL."""
    allow(cluster, states=False)
    return cluster.redis.url.replace("redis://", f"redis://{USER}:{PASSWORD}@")


def allow(cluster: Cluster, *, states: bool = True) -> None:
    client = redis.Redis.from_url(cluster.redis.url)
    try:
        keys = ["~*"] if states else ["%R~*", "~[^c]*"]  # (the tries' states are the only keys written with a c)
        client.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", "+@all", "&*", *keys)
    finally:
        client.close()


PATIENT = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "60"}


def a_try_running_where_redis_refuses_states(cluster: Cluster) -> tuple[Path, Path, Any, Any]:
    """A scheduler and worker w1 (whose Redis user may not write tries' states) with one try running until the test
    creates the `go` file. Returns (the trace, go, the worker, the scheduler)."""
    go = cluster.home.parent / "go"
    trace = traced_dag(cluster, 1, f"while [ ! -f {go} ]; do sleep 0.05; done; echo finished")
    cluster.start_webserver()
    worker = cluster.start_worker("w1", broker=refuse_states(cluster), **PATIENT)
    scheduler = start_scheduler(cluster, **PATIENT)
    wait_until("the try runs", lambda: ran(trace) == {"t0": [("start", "1")]})
    return trace, go, worker, scheduler


def test_a_try_whose_started_state_redis_refuses_runs_to_its_end_and_is_recorded_as_it_ended(
        cluster: Cluster) -> None:
    trace, go, worker, scheduler = a_try_running_where_redis_refuses_states(cluster)
    wait_until("the worker says it cannot say the try started",
               lambda: "cannot say in Redis that tries started" in cluster.procs.output(worker))
    go.touch()  # the try ends while its state cannot be written
    wait_until("the worker keeps its outcome", lambda: "kept here until Redis answers" in cluster.procs.output(worker))
    allow(cluster)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}
    log = (cluster.home / "logs" / "traced" / "run_1" / "t0" / "try_1.log").read_text()
    assert "\nfinished\n" in log and "outcome: success" in log, log


def test_an_outcome_kept_by_a_worker_killed_with_kill_9_is_delivered_by_its_next_incarnation(
        cluster: Cluster) -> None:
    trace, go, worker, scheduler = a_try_running_where_redis_refuses_states(cluster)
    go.touch()
    wait_until("the worker keeps its outcome", lambda: "kept here until Redis answers" in cluster.procs.output(worker))
    box = try_outbox.folder(cluster.home.parent / "worker-w1", "w1")
    assert [entry["result"]["state"] for _p, entry in try_outbox.kept(box)] == ["success"]
    os.kill(worker.pid, 9)  # the worker's main process, and its pool processes with it
    worker.wait(30)
    allow(cluster)
    again = cluster.start_worker("w1", **PATIENT)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}
    assert "delivered the outcome of" in cluster.procs.output(again)
    assert try_outbox.kept(box) == []


def test_a_lease_that_cannot_be_renewed_never_fences_a_try_that_has_exited(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the try: ends at once, by itself
        os._exit(0)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    item: Any = types.SimpleNamespace(execution_timeout=None, log_path=str(tmp_path / "try.log"))
    running = RunningTry(item, pid, read_fd, 0.0)
    unreachable = redis.Redis(port=free_port(), socket_timeout=0.2, socket_connect_timeout=0.2)
    lease = TryLease(unreachable, "ledger-1-1", '{"by":"w1 i1"}', 1.0, running.kill_unless_exited, os.getppid())
    lease.start()  # (its process is not reaped: the lease's thread finds it exited, a zombie)
    wait_for("the lease's end passes", lambda: lease._done, within=30.0)
    lease.stop()
    assert lease.fenced is None
    outcome = running.wait()
    assert outcome.state == "success" and not running.killed()


def store_success(executor: CeleryExecutor, tid: str, host: str) -> None:
    """The try's success stored as its worker (or its guard, or its worker's beat) delivers it."""
    report = TryReport("success", None, 1.0, "x", host).as_json()
    executor._app.backend.store_result(tid, {"state": "success", "host": host, "pid": 9, "at": 1.0, "report": report},
                                       "SUCCESS")


def state_read(executor: CeleryExecutor, status: bytes) -> None:
    """Wait until the executor has read every try's state as `status`."""
    wait_for(f"{status.decode()} read", lambda: all(t.seen is not None and status in t.seen
                                                    for t in executor._by_tid.values()), within=30.0)


REASON = "worker w1 stopped renewing its lease (3 s; the worker or its link to Redis is gone)"


@contextlib.contextmanager
def a_taken_lease(tmp_path: Path, redis_server: RedisServer, ti: int) -> Iterator[tuple[CeleryExecutor, Any, str]]:
    """A started try whose worker held its lease and then was cut off from Redis (its lease key gone): the executor
    takes the lease once the clock passes its length and grace. Yields (executor, its clock, the try's id)."""
    clock = FakeClock()
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600),
                              clock=clock)
    executor.start()
    backend = redis.Redis.from_url(redis_server.url)
    try:
        tid = started_try(executor, tmp_path, ti)
        backend.set(lease_key(tid), '{"by":"w1 i1","pool":8,"pgid":null,"ms":3000}')
        wait_for("the lease seen held", lambda: any(t.lease is not None for t in executor._by_tid.values()),
                 within=30.0)
        backend.delete(lease_key(tid))  # its worker is cut off from Redis: its try may end meanwhile
        clock.now += 3.0 * (1 + LEASE_GRACE) + 0.1
        wait_for("the lease taken", lambda: backend.get(lease_key(tid)) == taken_value(REASON).encode(), within=30.0)
        yield executor, clock, tid
    finally:
        executor.end(0)


def test_a_missing_lease_is_taken_and_an_outcome_delivered_after_it_is_recorded_as_the_try_ended(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with a_taken_lease(tmp_path, redis_server, 8) as (executor, _clock, tid):
        assert not [e for e in executor.drain() if e.kind == "finished"]
        store_success(executor, tid, "w1")
        ended = finished(executor)
        assert (ended.state, ended.host) == ("success", "w1")


def test_a_taken_lease_whose_try_sends_no_outcome_within_the_patience_is_lost(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with a_taken_lease(tmp_path, redis_server, 9) as (executor, clock, _tid):
        clock.now += 3.0 * OUTCOME_PATIENCE
        ended = finished(executor)
        assert (ended.state, ended.reason) == ("lost", REASON)


@contextlib.contextmanager
def an_executor(redis_server: RedisServer) -> Iterator[tuple[CeleryExecutor, Any]]:
    """A started CeleryExecutor on `redis_server` (leases of 600 s: none ends by itself within a test) and a client
    of that Redis."""
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        yield executor, redis.Redis.from_url(redis_server.url)
    finally:
        executor.end(0)


def test_a_try_whose_workers_task_raised_but_a_redelivery_claimed_runs_there_and_is_not_recorded_lost(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        tid = started_try(executor, tmp_path, 10)
        backend.set(claim_key(tid), "w2 another-delivery")  # its message came back and w2 claimed it
        executor._app.backend.mark_as_failure(tid, redis.ConnectionError("Connection refused"))  # the first one
        state_read(executor, b"FAILURE")
        store_success(executor, tid, "w2")
        ended = finished(executor)
        assert (ended.state, ended.host) == ("success", "w2")


def test_a_try_whose_workers_task_raised_is_lost_with_its_claim_taken_so_no_redelivery_runs_it(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        tid = started_try(executor, tmp_path, 11)
        executor._app.backend.mark_as_failure(tid, redis.ConnectionError("Connection refused"))
        ended = finished(executor)
        assert ended.state == "lost"
        assert backend.get(claim_key(tid)) == b"scheduler lost"


def test_a_raised_workers_end_read_while_redis_fails_the_claims_round_trip_is_recorded_lost_once_it_answers(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        real, failed = executor._claimed_again, []

        def blip(ended: list) -> list:  # the first round trip for a raised try's claim fails, as in a Redis restart
            if any(status == "FAILURE" for _entry, status, _result in ended) and not failed:
                failed.append(True)
                raise redis.ConnectionError("connection reset")
            return real(ended)

        executor._claimed_again = blip  # type: ignore[method-assign]  (before the try exists: nothing raised yet)
        tid = started_try(executor, tmp_path, 12)
        executor._app.backend.mark_as_failure(tid, redis.ConnectionError("Connection refused"))
        seen = ended_tries(executor, {12})
        assert failed and [(e.kind, e.state) for e in seen if e.kind == "finished"] == [("finished", "lost")]
        assert backend.get(claim_key(tid)) == b"scheduler lost"
        assert executor.in_flight() == set()


def test_a_raised_workers_end_whose_claim_the_scheduler_took_before_is_recorded_lost_at_once(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        tid = started_try(executor, tmp_path, 15)
        # the scheduler's claim already there: a round trip that took it lost its reply (or a later one of the
        # same read failed), and the end is read again
        backend.set(claim_key(tid), "scheduler lost")
        executor._app.backend.mark_as_failure(tid, redis.ConnectionError("Connection refused"))
        ended = finished(executor)
        assert (ended.state, ended.host) == ("lost", "w1")
        assert ended.reason is not None and "the worker's task raised" in ended.reason


def a_stopped_try_revoked(executor: CeleryExecutor, backend: Any, tmp_path: Path, ti_id: int, *,
                          claim: str | None) -> str:
    """A started try the job asked to stop, whose revocation Celery has recorded (REVOKED, read by the executor),
    with `claim` (a worker's: its pool process was killed by the revocation; None: no worker ever took it)."""
    tid = started_try(executor, tmp_path, ti_id)
    if claim is not None:
        backend.set(claim_key(tid), claim)
    assert executor.kill(ti_id, "stopped by signal 9")
    executor._app.backend.mark_as_revoked(tid, "terminated" if claim else "revoked")
    state_read(executor, b"REVOKED")
    return tid


def test_a_try_whose_code_succeeded_as_a_stop_killed_its_pool_process_is_recorded_success(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        tid = a_stopped_try_revoked(executor, backend, tmp_path, 16, claim="w1 i1")
        assert not [e for e in executor.drain() if e.kind == "finished"]  # the guard's word is awaited
        # the try's guard found the outcome its process kept and stores it over Celery's REVOKED
        store_success(executor, tid, "w1")
        ended = finished(executor)
        assert (ended.state, ended.host) == ("success", "w1")


def test_a_stopped_try_whose_guard_says_it_died_running_ends_with_the_stops_reason(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        tid = a_stopped_try_revoked(executor, backend, tmp_path, 17, claim="w1 i1")
        backend.set(lease_key(tid), dead_value("the pool process running it (pid 9) died; its processes were killed"))
        ended = finished(executor)
        assert (ended.state, ended.reason) == ("failed", "stopped by signal 9")


@pytest.mark.parametrize("claim", [None, f"{ADOPTION_CLAIM} 4242"])
def test_a_stopped_try_revoked_before_a_worker_claimed_it_ends_at_once_and_no_delivery_runs_it(
        tmp_path: Path, redis_server: RedisServer, claim: str | None) -> None:
    """No claim, or the claim of a scheduler that adopted the try (which every delivery is refused by)."""
    with an_executor(redis_server) as (executor, backend):
        tid = a_stopped_try_revoked(executor, backend, tmp_path, 18, claim=claim)
        ended = finished(executor)
        assert (ended.state, ended.reason) == ("failed", "stopped by signal 9")
        assert backend.get(claim_key(tid)) == (claim or "scheduler lost").encode()


@pytest.mark.parametrize("claim", [None, "w2 i1"])
def test_a_try_first_seen_revoked_is_started_only_where_a_worker_claimed_it(
        tmp_path: Path, redis_server: RedisServer, claim: str | None) -> None:
    """Its STARTED state never read (the stop came before the first read): claimed by worker w2, it started there
    and its guard decides its end; with no claim it never started anywhere and ends without a start."""
    with an_executor(redis_server) as (executor, backend):
        (item,) = items(tmp_path, 20)
        executor.submit_all([item])
        tid = task_id(20, 1, "")
        if claim is not None:
            backend.set(claim_key(tid), claim)
        assert executor.kill(20, "stopped by signal 9")
        executor._app.backend.mark_as_revoked(tid, "terminated" if claim else "revoked")
        state_read(executor, b"REVOKED")
        if claim is None:
            seen = wait_for_events(executor, "finished")
            assert [(e.kind, e.state, e.reason) for e in seen] == [("finished", "failed", "stopped by signal 9")]
            return
        seen = wait_for_events(executor, "started")
        assert [(e.kind, e.host) for e in seen] == [("started", "w2")]
        store_success(executor, tid, "w2")
        ended = finished(executor)
        assert (ended.state, ended.host) == ("success", "w2")


def wait_for_events(executor: CeleryExecutor, kind: str) -> list[TaskEvent]:
    """The events drained until one of `kind` is among them."""
    seen: list[TaskEvent] = []
    wait_for(f"a {kind} event", lambda: seen.extend(executor.drain()) or any(e.kind == kind for e in seen),
             within=15.0)
    return seen


def test_a_stopped_try_whose_lease_is_still_renewed_a_lease_length_after_its_revocation_is_revoked_again(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Its worker missed the broadcast (its control connection dropped it): without a second one the try would run
    to its end though a stop was asked for."""
    clock = FakeClock()
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600), clock=clock)
    executor.start()
    backend = redis.Redis.from_url(redis_server.url)
    revoked: list[list[str]] = []
    executor._app.control.revoke = lambda tids, **_options: revoked.append(list(tids))  # type: ignore[method-assign]
    try:
        tid = started_try(executor, tmp_path, 19)
        backend.set(lease_key(tid), '{"by":"w1 i1","pool":8,"pgid":null,"ms":3000}')  # (held: renewed throughout)
        wait_for("the lease seen held", lambda: any(t.lease is not None for t in executor._by_tid.values()),
                 within=30.0)
        assert executor.kill(19, "stopped by signal 9")
        wait_for("the revocation sent", lambda: revoked == [[tid]], within=30.0)
        clock.now += 2.9
        assert [e.kind for e in executor.drain()] == ["started"] and revoked == [[tid]]
        clock.now += 0.2  # a lease length (3 s) after the revocation, its lease still held
        wait_for("the revocation sent again", lambda: revoked == [[tid], [tid]], within=30.0)
    finally:
        executor.end(0)


def test_tries_whose_leases_say_dead_while_redis_fails_their_logs_round_trip_are_each_recorded_lost_once(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with an_executor(redis_server) as (executor, backend):
        real, failed = executor._append_logs, []

        def blip(entries: list) -> None:  # the leases' check's first round trip for the second try's log fails
            if sys._getframe(1).f_code.co_name == "_check_leases" and any(e.item.ti_id == 14 for e in entries) \
                    and not failed:
                failed.append(True)
                raise redis.ConnectionError("connection reset")
            real(entries)

        executor._append_logs = blip  # type: ignore[method-assign]  (before any lease says dead)
        tids = [started_try(executor, tmp_path, ti) for ti in (13, 14)]
        wait_for("both starts read", lambda: all(t.started for t in list(executor._by_tid.values())), within=30.0)
        died = dead_value("the pool process running it (pid 9) died; its processes were killed")
        backend.mset({lease_key(tid): died for tid in tids})  # (one write: one check sees both)
        seen = ended_tries(executor, {13, 14})
        assert failed
        assert sorted((e.ti_id, e.state) for e in seen if e.kind == "finished") == [(13, "lost"), (14, "lost")]
        assert executor.in_flight() == set()


def ended_tries(executor: CeleryExecutor, ti_ids: set[int]) -> list[TaskEvent]:
    """The executor's events until each of `ti_ids` has ended, and those of the next drain (an end reported twice
    would be in them)."""
    seen: list[TaskEvent] = []
    wait_for("the tries' ends", lambda: seen.extend(executor.drain())
             or {e.ti_id for e in seen if e.kind == "finished"} >= ti_ids, within=30.0)
    return seen + executor.drain()


# A Python try that writes its end line, returns, and then (as its process writes its log's outcome line) flushes a
# stream its code left in sys.stderr, which blocks on opening a FIFO no one writes to: its code has ended, its process
# has not exited, and it stays so until it is killed. Nothing the test waits on is time.
ENDS_THEN_BLOCKS = """
import os
import sys

import pendulum
from ledger import DAG, PythonTask

TRACE, RELEASE = @TRACE@, @RELEASE@


""" + SLOW_STREAM + """

def ends(context):
    with open(TRACE, "a") as trace:
        trace.write(f"start t0 {context.try_number} {os.getpid()}\\n")
        trace.write(f"end t0 {context.try_number}\\n")
    sys.stderr = SlowStream(sys.stderr)
    return 7


with DAG("traced", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("t0", ends)
"""


def test_a_try_whose_worker_is_killed_after_its_code_ended_and_before_its_process_exited_is_recorded_as_it_ended(
        cluster: Cluster) -> None:
    trace, release = cluster.home.parent / "trace", cluster.home.parent / "release"
    trace.touch()
    os.mkfifo(release)
    write_dag(cluster, "traced.py", ENDS_THEN_BLOCKS.replace("@TRACE@", repr(str(trace)))
              .replace("@RELEASE@", repr(str(release))))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "traced").returncode == 0
    cluster.start_webserver()
    worker = cluster.start_worker("w1", broker=refuse_states(cluster), **PATIENT)  # (its guard cannot deliver)
    scheduler = start_scheduler(cluster, **PATIENT)
    box = try_outbox.folder(cluster.home.parent / "worker-w1", "w1")
    wait_until("the try's code ended and its process left its outcome in the outbox",
               lambda: ran(trace) == {"t0": [("start", "1"), ("end", "1")]} and try_outbox.kept(box) != [])
    (entry,) = [entry for _p, entry in try_outbox.kept(box)]
    assert entry["result"]["state"] == "success" and entry["result"]["report"]["pushed"] == [["return_value", 7]]
    (log,) = (cluster.home.parent / "worker-w1" / "logs").rglob("try_1.log")
    assert "outcome: success" not in log.read_text()  # its process is still in its end: it has not exited
    (try_pid,) = [int(words[3]) for words in lines(trace) if words[0] == "start"]
    pool = parent_of(try_pid)
    wait_until("the try's guard runs", lambda: [pid for pid in children(pool) if pid != try_pid] != [])
    guards = [pid for pid in children(pool) if pid != try_pid]
    os.kill(worker.pid, 9)  # the worker's main process; its pool process and the try die with it
    worker.wait(30)
    wait_until("the try's guard has tried to deliver the outcome and is gone", lambda: all(dead(g) for g in guards))
    allow(cluster)  # (only now: the worker's next incarnation delivers it)
    again = cluster.start_worker("w1", **PATIENT)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}  # its code ran once
    assert "delivered the outcome of" in cluster.procs.output(again)
    assert try_outbox.kept(box) == []


@pytest.mark.parametrize("sent_before", [b"", b"head of the log\n"])
def test_the_rest_of_a_log_sent_with_its_outcome_ends_the_recorded_log_without_being_in_redis(
        tmp_path: Path, redis_server: RedisServer, sent_before: bytes) -> None:
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    backend = redis.Redis.from_url(redis_server.url)
    try:
        tid = started_try(executor, tmp_path, 12)
        if sent_before:  # (what its worker sent while it ran, which this executor has not read yet)
            backend.set(log_key(tid), sent_before)
        rest = b"[ledger] outcome: success after 0.010 s\n"  # (never written to the log's key in Redis)
        report = TryReport("success", None, 1.0, "x", "w1").as_json()
        executor._app.backend.store_result(tid, {"state": "success", "host": "w1", "pid": 9, "at": 1.0,
                                                 "report": report, "log_bytes": len(sent_before) + len(rest),
                                                 "log_tail": [len(sent_before), base64.b64encode(rest).decode()]},
                                           "SUCCESS")
        ended = finished(executor)
        assert ended.state == "success" and ended.report is not None
        assert ended.report.log == (sent_before + rest).decode()
    finally:
        executor.end(0)


def test_a_stop_that_reaches_a_try_after_its_code_ended_on_a_real_worker_leaves_it_recorded_as_it_ended(
        cluster: Cluster) -> None:
    """The operator's STOP signal while the try's code has ended and its process has not exited: the revocation's
    SIGTERM stops the pool process, which delivers the outcome the try left (decision 0348); before, Celery's
    REVOKED was read as the stop's failure, and the task instance ended stopped though its code had succeeded."""
    trace, release = cluster.home.parent / "trace", cluster.home.parent / "release"
    trace.touch()
    os.mkfifo(release)
    source = ENDS_THEN_BLOCKS.replace("@TRACE@", repr(str(trace))).replace("@RELEASE@", repr(str(release)))
    write_dag(cluster, "traced.py", source.replace('PythonTask("t0", ends)',
                                                   'PythonTask("t0", ends, signals={"traced.control": "STOP"})'))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "traced").returncode == 0
    cluster.start_webserver()
    cluster.start_worker("w1", **PATIENT)
    scheduler = start_scheduler(cluster, **PATIENT)
    box = try_outbox.folder(cluster.home.parent / "worker-w1", "w1")
    wait_until("the try's code ended and its process left its outcome in the outbox",
               lambda: ran(trace) == {"t0": [("start", "1"), ("end", "1")]} and try_outbox.kept(box) != [])
    sent = ledger(cluster, "signal", "send", "traced.control", "stop")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}  # its code ran once
    actions = json.loads(ledger(cluster, "events", "--dag", "traced", "--kind", "signal_action", "--json").stdout)
    assert [e["details"].get("action") for e in actions] == ["STOP"]
    assert try_outbox.kept(box) == []



BLOCKED = """
import pendulum
from ledger import DAG, PythonTask

RAN = @RAN@


def ran(context):
    open(RAN, "w").close()


with DAG("blocked", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("t0", ran, signals={"blocked.control": "STOP"})
"""


def test_a_stop_that_reaches_a_pool_process_before_the_trys_code_ran_is_recorded_at_once(cluster: Cluster) -> None:
    """The pool process has claimed the try and waits for its code (the webserver is down: it asks again with
    back-off) when the revocation's SIGTERM comes: no guard exists yet, and nothing ran. Its lease says so as the
    process unwinds (decision 0348), so the stop is recorded at the scheduler's next look at the leases, not once the
    lease has run out (three lease lengths and more: this test's scheduler would not end within its wait)."""
    ran_file = cluster.home.parent / "ran"
    write_dag(cluster, "blocked.py", BLOCKED.replace("@RAN@", repr(str(ran_file))))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "blocked").returncode == 0
    cluster.start_worker("w1", LEDGER_WORKER_CODE_FETCH_PATIENCE="600", **PATIENT)  # (no webserver to give code)
    scheduler = start_scheduler(cluster, **PATIENT)
    backend = redis.Redis.from_url(cluster.redis.url)
    wait_until("the pool process claims the try", lambda: any(backend.scan_iter("ledger:claim:*")))
    sent = ledger(cluster, "signal", "send", "blocked.control", "stop")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert scheduler.wait(60) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "blocked")] == [(1, "stopped")]
    assert not ran_file.exists()
    leases = [json.loads(backend.get(key) or b"{}") for key in backend.scan_iter("ledger:lease:*")]
    assert [lease.get("dead", "").split(" ended before ")[-1][:9] for lease in leases] == ["the try r"]
