"""Remote tries whose trace in Redis is partly gone, with a real redis-server (the fleet's chaos tests and soak,
tests/chaos/ and benchmarks/fleet_soak.py, found both cases): what a scheduler that takes over adopts, and what
becomes of a try whose worker claimed it and died before saying it started."""

from __future__ import annotations

from pathlib import Path

import redis

from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.executors.celery import CeleryExecutor
from ledger.scheduler.executors.celery_app import CeleryConfig, claim_key, task_id
from ledger.scheduler.runtime.try_lease import dead_value, lease_key
from tests.celery_cluster import RedisServer
from tests.scheduler.test_celery_queued_timeout import wait_for
from tests.scheduler.test_celery_sending import items


def test_a_try_whose_only_trace_in_redis_is_its_lease_is_adopted_not_lost(tmp_path: Path,
                                                                         redis_server: RedisServer) -> None:
    """Redis restarted without its data forgets a running try's message, queued mark and state; its supervisor
    puts the lease back at its next renewal. A scheduler that takes over then must follow the try (it runs), not
    leave it to be recorded lost and run again beside itself."""
    client = redis.Redis.from_url(redis_server.url)
    client.set(lease_key(task_id(9, 1)), '{"by":"w1 i1","pool":8,"pgid":9,"ms":3000}')
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        found = executor.find([(item, True) for item in items(tmp_path, 9, 10)])
        assert set(found) == {9}  # (10: no trace at all)
        assert executor.in_flight() == set()
        executor.follow(found)  # (the job adopted it)
        assert executor.in_flight() == {9}
    finally:
        executor.end(0)
        client.close()


def test_a_try_a_worker_claimed_and_died_with_before_saying_it_started_is_lost_by_its_lease_not_resent(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Its worker was killed between the claim and the try's STARTED state. Sent again, the message would be
    refused by the claim at every queued timeout (the task instance stuck for the claim's days), or run the same try
    twice once the claim is gone. Past the queued timeout the claimed try is taken as started on the claimer, and
    its lease says what became of it."""
    now = [1000.0]
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600,
                                              queued_timeout=30.0), clock=lambda: now[0])
    client = redis.Redis.from_url(redis_server.url)
    executor.start()
    try:
        (item,) = items(tmp_path, 12)
        executor.submit_all([item])
        tid = task_id(12, 1)
        client.set(claim_key(tid), "w1 5f3a")
        client.set(lease_key(tid), dead_value("its worker's main process (pid 8) died; its processes were killed"))
        now[0] += 30.0
        seen: list[TaskEvent] = []
        wait_for("the try's end", lambda: seen.extend(executor.drain()) or any(e.kind == "finished" for e in seen),
                 within=15.0)
        assert [(e.kind, e.state, e.host) for e in seen] == [("started", None, "w1"), ("finished", "lost", "w1")]
        assert seen[1].reason == "its worker's main process (pid 8) died; its processes were killed"
        assert client.llen("nobody") == 1 and executor.remarks() == []  # not sent again
    finally:
        executor.end(0)
        client.close()
