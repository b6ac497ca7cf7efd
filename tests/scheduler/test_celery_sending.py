"""The job's thread sends a loop's tries as one batch while the broker answers; a broker that does not answer leaves
them to the sender thread, which sends them once it does (decision 193); an end read while Redis fails the round
trip for its log is reported once Redis answers: a real redis-server, no worker (its states are stored as a
worker stores them)."""

from __future__ import annotations

import dataclasses
import json
import select
import threading
import time
from pathlib import Path

import pytest
import redis

from ledger.infra.workers import log_key, worker_key
from ledger.scheduler.executors.celery import CeleryExecutor
from ledger.scheduler.executors.celery_app import CeleryConfig, queued_key, task_id
from ledger.scheduler.loop.metrics import SchedulerMetrics
from ledger.scheduler.runtime.try_report import TryReport
from tests.celery_cluster import RedisServer, free_port, require_redis
from tests.scheduler.test_celery_queued_timeout import wait_for
from tests.scheduler.test_task_runner import work_item

pytestmark = pytest.mark.timeout(90)


def items(tmp_path: Path, *ti_ids: int, queue: str = "nobody") -> list:
    return [dataclasses.replace(work_item(tmp_path / "dag.py", "t", ti_id=ti_id), queue=queue) for ti_id in ti_ids]


def test_a_loops_tries_are_sent_and_marked_queued_before_submit_all_returns(
        tmp_path: Path, redis_server: RedisServer) -> None:
    executor = CeleryExecutor(4, CeleryConfig(redis_server.url, redis_server.url))
    broker = redis.Redis.from_url(redis_server.url)
    executor.start()
    try:
        executor.submit_all(items(tmp_path, 1, 2, 3))
        assert broker.llen("nobody") == 3  # (no wait: written by this thread, in one batch)
        assert all(broker.exists(queued_key(task_id(ti, 1, ""))) for ti in (1, 2, 3))
        assert executor.in_flight() == {1, 2, 3} and executor.send_problem is None
    finally:
        executor.end(0)


def test_tries_sent_while_the_broker_is_down_wait_for_it_and_are_sent_once_when_it_is_back(tmp_path: Path) -> None:
    require_redis()
    server = RedisServer(tmp_path / "redis", port=free_port())  # (not started yet: nothing listens on its port)
    executor = CeleryExecutor(4, CeleryConfig(server.url, server.url))
    metrics, said = SchedulerMetrics(), []
    executor.use_metrics(metrics)
    executor.use_say(said.append)
    executor.start()
    try:
        executor.submit_all(items(tmp_path, 7, 8))  # returns though nothing listens yet: the loop is not held
        assert executor.send_problem is not None and executor.in_flight() == {7, 8}
        # the reader thread meets the refusing Redis too; the server starts once it has (not before, on a busy machine)
        wait_for("the reader's failure said", lambda: any("from Redis fails" in line for line in said), within=30.0)
        server.start()
        broker = redis.Redis.from_url(server.url)
        wait_for("the messages sent by the sender thread", lambda: broker.llen("nobody") == 2, within=30.0)
        wait_for("the sender's success noted", lambda: executor.send_problem is None, within=30.0)
        wait_for("the reader's recovery said", lambda: any("from Redis works again" in line for line in said),
                 within=30.0)
        executor.submit_all(items(tmp_path, 9))  # the job's thread sends again
        assert broker.llen("nobody") == 3
    finally:
        executor.end(0)
        server.stop()
    # one line when sending (and reading, the same Redis) starts failing and one when it works again, however often
    # it was tried; each counted
    assert sorted(line.split(" (")[0] for line in said) == [
        "celery executor: reading the tries' states from Redis fails",
        "celery executor: reading the tries' states from Redis works again",
        "celery executor: sending tries to the broker fails",
        "celery executor: sending tries to the broker works again"]
    refused = f"connecting to 127.0.0.1:{server.port}"
    assert all(refused in line and line.endswith("; trying again") for line in said if "fails" in line), said
    for kind in ("send", "read"):
        assert fleet_count(metrics, "faults", "executor", kind) == 1
        assert fleet_count(metrics, "recoveries", "executor", kind) == 1
        assert fleet_count(metrics, "failing", "executor", kind) == 0


def fleet_count(metrics: SchedulerMetrics, name: str, component: str, kind: str) -> float:
    """A fleet metric's value (scheduler/executors/fleet_faults.py) as the scheduler's registry exposes it."""
    metric = {"faults": "ledger_fleet_faults_total", "recoveries": "ledger_fleet_recoveries_total",
              "failing": "ledger_fleet_failing"}[name]
    value = metrics.registry.get_sample_value(metric, {"component": component, "kind": kind})
    return value or 0.0


def test_an_end_read_while_redis_fails_the_logs_round_trip_is_reported_once_it_answers(
        tmp_path: Path, redis_server: RedisServer) -> None:
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url))
    backend = redis.Redis.from_url(redis_server.url)
    executor.start()
    real, failed = executor._append_logs, []

    def blip(entries: list) -> None:  # the first round trip for an ended try's log fails, as in a Redis restart
        if any(entry.done for entry in entries) and not failed:
            failed.append(True)
            raise redis.ConnectionError("connection reset")
        real(entries)

    executor._append_logs = blip  # type: ignore[method-assign]
    try:
        (item,) = items(tmp_path, 5)
        executor.submit_all([item])
        tid = task_id(5, 1, "")
        backend.set(worker_key("w1"), json.dumps({"incarnation": "i1"}))
        backend.set(log_key(tid), b"hello from the worker\n")
        store = executor._app.backend  # (what a worker stores: its start, then its outcome)
        store.store_result(tid, {"host": "w1", "pid": 7, "at": time.time(), "incarnation": "i1"}, "STARTED")
        report = TryReport("success", None, time.time(), host="w1").as_json()
        store.store_result(tid, {"state": "success", "host": "w1", "pid": 7, "at": time.time(), "report": report},
                           "SUCCESS")
        seen: list = []
        wait_for("the try's end", lambda: seen.extend(executor.drain()) or any(e.kind == "finished" for e in seen),
                 within=15.0)
        assert failed and [e.kind for e in seen] == ["started", "finished"]
        assert seen[-1].state == "success" and seen[-1].report is not None \
            and seen[-1].report.log == "hello from the worker\n"
        assert executor.in_flight() == set()
    finally:
        executor.end(0)


def _held_until_woken(executor: CeleryExecutor, release: threading.Event) -> None:
    """The reader's gauges (its other work) held from the moment a try's end was read until `release`."""
    real = executor._measure

    def held() -> None:
        if any(entry.done for entry in list(executor._shared.tries.values())):  # the end was read
            release.wait(60)
        real()

    executor._measure = held  # type: ignore[method-assign]


@pytest.mark.parametrize("published", [True, False], ids=["published", "read-by-the-fallback"])
def test_an_end_wakes_the_job_before_the_reader_does_any_other_work(tmp_path: Path, redis_server: RedisServer,
                                                                    published: bool) -> None:
    """The reader wakes the job's loop as soon as it reads a try's end: its other work (here its gauges, held from the
    moment the end was read until the test has seen the job woken) waits. So does an end whose publication the
    reader missed (stored before it subscribed, or while Redis restarted), read by its fallback read of every state:
    the test stores that one without publishing it."""
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url))
    executor.start()
    release = threading.Event()
    _held_until_woken(executor, release)
    client = redis.Redis.from_url(redis_server.url)
    try:
        (item,) = items(tmp_path, 6)
        executor.submit_all([item])
        report = TryReport("success", None, time.time(), host="w1").as_json()
        result = {"state": "success", "host": "w1", "pid": 7, "at": time.time(), "report": report}
        backend = executor._app.backend
        if published:
            backend.store_result(task_id(6, 1, ""), result, "SUCCESS")
        else:
            client.set(backend.get_key_for_task(task_id(6, 1, "")),
                       backend.encode({"status": "SUCCESS", "result": result, "task_id": task_id(6, 1, "")}))
        woken, _, _ = select.select(executor.wait_handles(), [], [], 30.0)
        assert woken, "the job's loop was not woken for the try's end"
        assert [(e.kind, e.state) for e in executor.drain()] == [("started", None), ("finished", "success")]
    finally:
        release.set()
        executor.end(0)
        client.close()
