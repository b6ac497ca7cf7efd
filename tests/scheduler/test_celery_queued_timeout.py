"""A remote try that no worker claims within the queued timeout is sent again, as the same try (decision 180): the
rule alone, its setting, and the CeleryExecutor on a real redis-server with a fixed clock and no worker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from ledger.core.errors import ConfigError
from ledger.scheduler.executors.celery import CeleryExecutor, _Try, unclaimed
from ledger.scheduler.executors.celery_app import DEFAULT_QUEUED_TIMEOUT, QUEUED_TIMEOUT_VARIABLE, CeleryConfig, task_id
from tests.celery_cluster import RedisServer
from tests.scheduler.test_task_runner import work_item

pytestmark = pytest.mark.timeout(60)
BROKER = "redis://127.0.0.1:1/0"


def a_try(tmp_path: Path, ti_id: int, **state: object) -> _Try:
    item = work_item(tmp_path / "dag.py", "t", ti_id=ti_id)
    return _Try(item, task_id(ti_id, 1, ""), **state)  # type: ignore[arg-type]


def test_only_tries_sent_long_enough_ago_and_never_started_are_unclaimed(tmp_path: Path) -> None:
    waiting = a_try(tmp_path, 1, sent=True, sent_at=100.0)
    recent = a_try(tmp_path, 2, sent=True, sent_at=150.0)
    started = a_try(tmp_path, 3, sent=True, sent_at=100.0, started=True)
    ended = a_try(tmp_path, 4, sent=True, sent_at=100.0, done=True)
    stopping = a_try(tmp_path, 5, sent=True, sent_at=100.0, killed="asked to stop")
    not_sent = a_try(tmp_path, 6)
    tries = [waiting, recent, started, ended, stopping, not_sent]
    assert unclaimed(tries, 159.9, 60.0) == []
    assert unclaimed(tries, 160.0, 60.0) == [waiting]
    assert unclaimed(tries, 210.0, 60.0) == [waiting, recent]
    assert unclaimed(tries, 160.0, 60.1) == []


def test_the_queued_timeout_is_airflows_600_seconds_unless_set_and_a_bad_value_is_refused_in_one_line() -> None:
    assert CeleryConfig.from_env({"LEDGER_CELERY_BROKER_URL": BROKER}).queued_timeout == DEFAULT_QUEUED_TIMEOUT == 600
    assert CeleryConfig.from_env({"LEDGER_CELERY_BROKER_URL": BROKER, QUEUED_TIMEOUT_VARIABLE: "2.5"}).queued_timeout \
        == 2.5
    for bad in ("soon", "0", "-3", "inf", "nan"):
        with pytest.raises(ConfigError) as refused:
            CeleryConfig.from_env({"LEDGER_CELERY_BROKER_URL": BROKER, QUEUED_TIMEOUT_VARIABLE: bad})
        assert QUEUED_TIMEOUT_VARIABLE in str(refused.value) and "\n" not in str(refused.value)


def wait_for(what: str, check: object, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_try_no_worker_claims_within_the_timeout_is_sent_again_once_per_timeout_with_a_remark(
        tmp_path: Path, redis_server: RedisServer) -> None:
    now, reads = [1000.0], [0]

    def clock() -> float:
        reads[0] += 1
        return now[0]

    def looked_twice(what: str) -> None:
        """Until the executor has read the clock three times more (the reader reads it once per look at the
        unclaimed tries, the sender once per batch sent): a whole look began and ended since the clock was set,
        so what it would do is done."""
        seen = reads[0]
        wait_for(what, lambda: reads[0] >= seen + 3)

    config = CeleryConfig(redis_server.url, redis_server.url, queued_timeout=30.0)
    executor = CeleryExecutor(2, config, clock=clock)
    broker = redis.Redis.from_url(redis_server.url)
    item = work_item(tmp_path / "dag.py", "t", ti_id=41)
    item = type(item)(**{**item.__dict__, "queue": "nobody"})  # a queue no worker serves
    executor.start()
    try:
        executor.submit(item)
        wait_for("the try's message", lambda: broker.llen("nobody") == 1)
        now[0] += 29.9
        looked_twice("the reader's look at 29.9 s")
        assert broker.llen("nobody") == 1 and executor.remarks() == []
        now[0] += 0.1
        wait_for("the message sent again", lambda: broker.llen("nobody") == 2)
        remarks = executor.remarks()
        assert [(r["kind"], r["ti_id"], r["try_number"], r["queue"]) for r in remarks] == [
            ("try_resent", 41, 1, "nobody")]
        assert "within 30 s" in remarks[0]["reason"]
        looked_twice("the reader's look after the resend")  # the clock stands still: not sent a third time
        assert broker.llen("nobody") == 2 and executor.in_flight() == {41}
    finally:
        executor.end(0)
