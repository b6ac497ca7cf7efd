"""What a scheduler that takes over from one killed with kill -9 adopts of its remote tries, with a real redis-server
(the fleet's chaos tests, tests/chaos/, found the case)."""

from __future__ import annotations

from pathlib import Path

import redis

from scheduler.executors.celery import CeleryExecutor
from scheduler.executors.celery_app import CeleryConfig, task_id
from scheduler.runtime.try_lease import lease_key
from tests.celery_cluster import RedisServer
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
        assert executor.adopt([(item, True) for item in items(tmp_path, 9, 10)]) == {9}  # (10: no trace at all)
    finally:
        executor.end(0)
        client.close()
