"""Remote tries whose trace in Redis is partly gone, with a real redis-server (the fleet's chaos tests and soak,
tests/chaos/ and benchmarks/fleet_soak.py, found both cases): what a scheduler that takes over adopts, and what
becomes of a try whose worker claimed it and died before saying it started."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.executors.celery import ADOPTION_CLAIM, CeleryExecutor
from ledger.scheduler.executors.celery_app import REFUSED, CeleryConfig, claim_key, task_id
from ledger.scheduler.runtime.try_lease import claim_with_lease, dead_value, lease_key
from tests.celery_cluster import RedisServer
from tests.scheduler.test_celery_queued_timeout import wait_for
from tests.scheduler.test_celery_sending import items


@contextlib.contextmanager
def past_queued_timeout(redis_server: RedisServer, now: list[float]) -> Iterator[tuple[CeleryExecutor, Any]]:
    """A started executor whose queued timeout (30 s) is reached by moving `now`, and a client of its Redis."""
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600,
                                              queued_timeout=30.0), clock=lambda: now[0])
    client = redis.Redis.from_url(redis_server.url)
    executor.start()
    try:
        yield executor, client
    finally:
        executor.end(0)
        client.close()


def test_a_try_whose_only_trace_in_redis_is_its_lease_is_adopted_not_lost(tmp_path: Path,
                                                                         redis_server: RedisServer) -> None:
    """Redis restarted without its data forgets a running try's message, queued mark and state; its supervisor
    puts the lease back at its next renewal. A scheduler that takes over then must follow the try (it runs), not
    leave it to be recorded lost and run again beside itself."""
    client = redis.Redis.from_url(redis_server.url)
    client.set(lease_key(task_id(9, 1, "")), '{"by":"w1 i1","pool":8,"pgid":9,"ms":3000}')
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        found = executor.find([(item, True) for item in items(tmp_path, 9)])
        assert set(found) == {9}
        assert executor.in_flight() == set()
        executor.follow(found)  # (the job adopted it)
        assert executor.in_flight() == {9}
    finally:
        executor.end(0)
        client.close()


def test_a_try_redis_knows_nothing_of_is_followed_and_lost_only_once_its_lease_was_taken(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """The scheduler that takes over may look before the supervisor's next renewal has put the lease back (the
    fleet's chaos test found it: recorded lost at adoption, the try ran on and succeeded, and so did its next try);
    a try recorded queued may run too (its worker claimed it before the dead job recorded its start, and Redis then
    lost its data). Each is followed whatever Redis holds: its missing lease is taken once it has been missing for
    its length and a third more (a supervisor that comes back finds it taken and kills its try), and the try is
    lost only once no outcome came after that. The queued one is claimed first, so that a message of it a worker
    took before is refused; a claim already there stays."""
    now = [1000.0]
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=3.0),
                              clock=lambda: now[0])
    client = redis.Redis.from_url(redis_server.url)
    executor.start()
    try:
        started, queued, claimed = items(tmp_path, 10, 11, 14)
        client.set(claim_key(task_id(14, 1, "")), "w2 77aa")  # (a worker claimed it as the scheduler looked)
        found = executor.find([(started, True), (queued, False), (claimed, False)])
        assert {ti: was_started for ti, (_item, was_started, _tid) in found.items()} == {10: True, 11: True, 14: True}
        holder = claim_with_lease(client, task_id(11, 1, ""), (claim_key(task_id(11, 1, "")), "w1 5f3a", 60), "running",
                                  '{"by":"w1 i1"}', 3.0)
        assert holder is not None and holder.decode().split(" ")[0] == ADOPTION_CLAIM  # refused
        assert client.get(claim_key(task_id(14, 1, ""))) == b"w2 77aa"
        executor.follow({ti: found[ti] for ti in (10, 11)})
        now[0] += 4.1  # (missing for its length and a third)
        leases = [lease_key(task_id(ti, 1, "")) for ti in (10, 11)]
        wait_for("the missing leases taken", lambda: all(b"no worker held its lease" in (client.get(key) or b"")
                                                         for key in leases), within=15.0)
        assert executor.drain() == []  # (an outcome the worker kept may still come)
        now[0] += 6.1
        seen: list[TaskEvent] = []
        wait_for("the tries' ends", lambda: seen.extend(executor.drain()) or len(seen) >= 2, within=15.0)
        assert sorted((e.ti_id, e.kind, e.state) for e in seen) == [(10, "finished", "lost"), (11, "finished", "lost")]
        assert {e.reason for e in seen} == {
            "no worker held its lease within 3 s and a third of this scheduler taking it over (its message was never "
            "sent or went with Redis's data, or its worker or its link to Redis is gone)"}
    finally:
        executor.end(0)
        client.close()


def test_a_try_past_the_queued_timeout_whose_lease_is_held_though_its_claim_is_gone_is_taken_as_started_not_resent(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Redis lost its data while the try ran: its supervisor put the lease back, its claim and state are gone. Sent
    again, the message would be claimed anew and run the try a second time."""
    now = [1000.0]
    with past_queued_timeout(redis_server, now) as (executor, client):
        (item,) = items(tmp_path, 15)
        executor.submit_all([item])
        client.set(lease_key(task_id(15, 1, "")), '{"by":"w3 i2","pool":8,"pgid":9,"ms":600000}')
        now[0] += 30.0
        seen: list[TaskEvent] = []
        wait_for("the try taken as started", lambda: seen.extend(executor.drain()) or bool(seen), within=15.0)
        assert [(e.kind, e.host) for e in seen] == [("started", "w3")]
        assert client.llen("nobody") == 1 and executor.remarks() == []  # not sent again


def test_a_scheduler_that_cannot_read_redis_when_it_takes_over_judges_no_try_and_follows_them_all(
        tmp_path: Path, redis_server: RedisServer, capfd: pytest.CaptureFixture[str]) -> None:
    """Nothing is known of the tries while Redis does not answer: none is recorded lost (each may run on)."""
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        redis_server.stop()
        found = executor.find([(item, started) for item, started in zip(items(tmp_path, 12, 13), (True, False),
                                                                        strict=True)])
        assert set(found) == {12, 13}
        said = capfd.readouterr().err
        assert "celery executor: looking up the tries to adopt in Redis fails (ConnectionError" in said
    finally:
        redis_server.start()
        executor.end(0)


class ClaimsRoundTripFails:
    """The executor's Redis client, whose second pipeline made by the test's thread fails as it is sent (Redis
    dropped between find()'s look and its claims)."""

    def __init__(self, client: Any) -> None:
        self.client, self.owner, self.made = client, threading.get_ident(), 0

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = self.client.pipeline(*args, **kwargs)
        if threading.get_ident() == self.owner:
            self.made += 1
            if self.made == 2:
                def fail() -> None:
                    raise redis.ConnectionError("connection reset")
                pipe.execute = fail
        return pipe

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_try_redis_knows_nothing_of_whose_claim_could_not_be_written_is_followed_as_recorded_not_as_started(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Followed as started without its claim, it would be lost by its lease while a worker could still take its
    message and run it beside its next try; followed as sent (as recorded), the queued timeout reads its claim
    before it sends it again or takes it as started."""
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        flaky = ClaimsRoundTripFails(executor._client)
        executor._client = flaky
        found = executor.find([(item, False) for item in items(tmp_path, 16)])
        assert flaky.made == 2
        assert {ti: was_started for ti, (_item, was_started, _tid) in found.items()} == {16: False}
        assert redis.Redis.from_url(redis_server.url).get(claim_key(task_id(16, 1, ""))) is None
    finally:
        executor.end(0)


def test_a_try_a_worker_claimed_and_died_with_before_saying_it_started_is_lost_by_its_lease_not_resent(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Its worker was killed between the claim and the try's STARTED state. Sent again, the message would be
    refused by the claim at every queued timeout (the task instance stuck for the claim's days), or run the same try
    twice once the claim is gone. Past the queued timeout the claimed try is taken as started on the claimer, and
    its lease says what became of it."""
    now = [1000.0]
    with past_queued_timeout(redis_server, now) as (executor, client):
        (item,) = items(tmp_path, 12)
        executor.submit_all([item])
        tid = task_id(12, 1, "")
        client.set(claim_key(tid), "w1 5f3a")
        client.set(lease_key(tid), dead_value("its worker's main process (pid 8) died; its processes were killed"))
        now[0] += 30.0
        seen: list[TaskEvent] = []
        wait_for("the try's end", lambda: seen.extend(executor.drain()) or any(e.kind == "finished" for e in seen),
                 within=15.0)
        assert [(e.kind, e.state, e.host) for e in seen] == [("started", None, "w1"), ("finished", "lost", "w1")]
        assert seen[1].reason == "its worker's main process (pid 8) died; its processes were killed"
        assert client.llen("nobody") == 1 and executor.remarks() == []  # not sent again


def test_a_message_of_a_try_claimed_at_adoption_that_a_worker_refused_is_said_as_such(
        redis_server: RedisServer) -> None:
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    client = redis.Redis.from_url(redis_server.url)
    executor.start()
    try:
        client.rpush(REFUSED, json.dumps({"ti_id": 11, "try_number": 1, "host": "w1", "claimed_by": ADOPTION_CLAIM}))
        remarks: list[dict[str, object]] = []
        wait_for("the refusal's remark", lambda: remarks.extend(executor.remarks()) or bool(remarks), within=15.0)
        assert remarks == [{"kind": "try_redelivery_refused", "ti_id": 11, "try_number": 1, "host": "w1",
                            "reason": "a message for try 1 reached worker w1 after the scheduler that took the try "
                                      "over had claimed it (it found no trace of it in Redis): refused",
                            "celery_task_id": None}]  # (a worker that did not name the task id)
    finally:
        executor.end(0)
        client.close()
