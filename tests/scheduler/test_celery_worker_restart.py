"""A `ledger worker` whose Celery consumer stops on an error it does not recover from (kombu's Redis transport after a
Redis restart, kombu issue 582) starts it again, in the same process, as a new incarnation of its name, and goes on
running tries (issue 40, decision 0258).

The error is the test's: the worker reaches Redis as a user of its own, and the test takes BRPOP (what the consumer
waits for messages with) from that user, which Celery's consumer does not recover from, then gives it back."""

from __future__ import annotations

import json

import pytest
import redis

from tests.celery_cluster import Cluster
from tests.scheduler.test_celery_executor import ledger, tries, wait_until
from tests.scheduler.test_celery_faults import ran, start_scheduler, traced_dag

pytestmark = pytest.mark.timeout(240)

USER, PASSWORD = "consumer", "consumer-secret"


def grant(cluster: Cluster, *commands: str) -> None:
    client = redis.Redis.from_url(cluster.redis.url)
    try:
        client.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", "~*", "&*", "+@all",
                               *commands)
    finally:
        client.close()


def test_a_worker_whose_consumer_stops_on_an_unrecoverable_error_starts_it_again_and_runs_tries(
        cluster: Cluster) -> None:
    grant(cluster)
    cluster.start_webserver()
    worker = cluster.start_worker("w1", broker=cluster.redis.url.replace("redis://", f"redis://{USER}:{PASSWORD}@"))
    grant(cluster, "-brpop")
    wait_until("the consumer stops and the worker says it starts again",
               lambda: "starting again as a new incarnation" in cluster.procs.output(worker))
    assert "Unrecoverable error" in cluster.procs.output(worker)
    grant(cluster)
    wait_until("the worker is ready again", lambda: cluster.procs.output(worker).count("ledger worker w1 ready") >= 2)
    assert worker.poll() is None
    trace = traced_dag(cluster, 1, "true")
    scheduler = start_scheduler(cluster)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s, h) for _t, _r, n, s, h in tries(cluster, "traced")] == [(1, "success", "w1")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}
    (listed,) = json.loads(ledger(cluster, "workers", "--json").stdout)
    assert listed["pid"] == worker.pid and len(listed["incarnations"]) >= 2
