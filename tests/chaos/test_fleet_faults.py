"""Faults of a Celery fleet injected one at a time (issue 40), each run checked whole by the fleet's invariants
(tests/chaos/fleet_invariants.py): real redis-server, ledger's webserver, `ledger worker` processes and the real
`ledger scheduler`. Every try of the traced DAG waits for the file `go` the test writes once it has made its
fault, so the fault always meets running tries."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ledger.infra.workers import DatabaseIdentity
from ledger.scheduler.executors.celery_app import task_id
from ledger.scheduler.runtime.try_lease import lease_key
from tests.celery_cluster import Cluster
from tests.chaos import faults
from tests.chaos.fleet_invariants import check, read_trace
from tests.chaos.traced import traced_dag
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import ledger, query, tries, wait_until, write_dag

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def first_task_ids(cluster: Cluster) -> list[str]:
    """The Celery task ids of the first tries of the cluster's task instances, as its scheduler names them."""
    (row,) = query(cluster, "SELECT identity, legacy_through FROM database_identity")
    identity = DatabaseIdentity(*row)
    return [task_id(ti, 1, identity.of(ti)) for (ti,) in query(cluster, "SELECT id FROM task_instance")]


def traced(cluster: Cluster, tasks: int, dag_id: str = "chaos", **kw: object) -> tuple[Path, Path]:
    """The traced DAG in the scheduler's DAGs folder, registered and triggered: its trace file and its go file."""
    trace, go = cluster.home.parent / "trace", cluster.home.parent / "go"
    trace.touch()
    write_dag(cluster, f"{dag_id}.py", traced_dag(dag_id, trace, tasks=tasks, go=go, **kw))  # type: ignore[arg-type]
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", dag_id).returncode == 0
    return trace, go


def start_scheduler(cluster: Cluster, name: str = "scheduler", **env: str) -> subprocess.Popen[bytes]:
    return cluster.procs.start(name, [LEDGER, "scheduler", "--executor", "celery", "--exit-when-idle"],
                               cluster.scheduler_env(**env), cluster.home)


def executions(trace: Path) -> int:
    by_ti, _alive = read_trace(trace)
    return sum(len(runs) for runs in by_ti.values())


def states(cluster: Cluster, dag_id: str = "chaos") -> list[tuple[str, int, str]]:
    return [(task, number, state) for task, _run, number, state, _host in tries(cluster, dag_id)]


def running(cluster: Cluster, n: int, dag_id: str = "chaos") -> bool:
    return [s for *_, s in states(cluster, dag_id)] == ["running"] * n


def events(cluster: Cluster, kind: str, dag_id: str = "chaos") -> list[dict[str, object]]:
    return list(json.loads(ledger(cluster, "events", "--dag", dag_id, "--kind", kind, "--json").stdout))


def holds_invariants(cluster: Cluster, trace: Path, dag_ids: tuple[str, ...] = ("chaos",)) -> None:
    report = check(trace, cluster.home / "ledger.db", list(dag_ids))
    assert not report.broken, "\n".join([*report.broken, trace.read_text()])


def test_a_fleet_without_faults_holds_every_invariant_and_a_failure_of_the_code_spends_its_retry(
        cluster: Cluster) -> None:
    trace, go = traced(cluster, 3, fail_first=("t1",))
    go.touch()
    cluster.start_webserver()
    cluster.start_worker("w1")
    scheduler = start_scheduler(cluster)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert sorted(states(cluster)) == [("t0", 1, "success"), ("t1", 1, "failed"), ("t1", 2, "success"),
                                       ("t2", 1, "success")]
    holds_invariants(cluster, trace)


def test_kill_9_of_the_scheduler_mid_run_leaves_its_tries_to_the_next_scheduler_which_adopts_them(
        cluster: Cluster) -> None:
    trace, go = traced(cluster, 6)
    cluster.start_webserver()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    first = start_scheduler(cluster, "scheduler-1")
    wait_until("four tries run (the others wait for a slot)", lambda: running(cluster, 4) and executions(trace) == 4)
    faults.kill9(first)
    second = start_scheduler(cluster, "scheduler-2")
    wait_until("the new scheduler adopts the four", lambda: len(events(cluster, "try_adopted")) >= 4)
    go.touch()
    assert second.wait(120) == 0, cluster.procs.output(second)
    assert sorted(states(cluster)) == [(f"t{i}", 1, "success") for i in range(6)]
    assert not events(cluster, "try_lost")
    holds_invariants(cluster, trace)


def test_redis_restarted_without_its_data_declares_no_live_worker_dead_and_loses_no_running_try(
        cluster: Cluster) -> None:
    trace, go = traced(cluster, 4)
    cluster.start_webserver()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    scheduler = start_scheduler(cluster)
    wait_until("four tries run", lambda: running(cluster, 4) and executions(trace) == 4)
    faults.restart_redis_without_its_data(cluster.redis)
    client = redis.Redis.from_url(cluster.redis.url)
    leases = [lease_key(tid) for tid in first_task_ids(cluster)]
    wait_until("the tries' supervisors hold their leases again", lambda: client.exists(*leases) == 4)
    wait_until("the workers beat again", lambda: client.exists("ledger:worker:w1", "ledger:worker:w2") == 2)
    client.close()
    go.touch()
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert sorted(states(cluster)) == [(f"t{i}", 1, "success") for i in range(4)]
    assert not events(cluster, "try_lost")
    assert sorted(w["name"] for w in json.loads(ledger(cluster, "workers", "--json").stdout)) == ["w1", "w2"]
    holds_invariants(cluster, trace)



def test_a_scheduler_that_takes_over_before_the_supervisors_put_their_leases_back_lets_each_try_run_once(
        cluster: Cluster) -> None:
    """Redis restarted without its data while no scheduler runs: its running tries' supervisors put their leases back
    at their next renewal, and the scheduler that takes over may look before that. The supervisors (the worker's pool
    processes) are held (SIGSTOP) until it has looked, far less than a lease's length: the tries it could not find
    must be followed, not recorded lost and run again beside themselves."""
    trace, go = traced(cluster, 2)
    cluster.start_webserver()
    long = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "120"}  # (a supervisor held longer than its lease kills its try)
    worker = cluster.start_worker("w1", **long)
    first = start_scheduler(cluster, "scheduler-1", **long)
    wait_until("two tries run", lambda: running(cluster, 2) and executions(trace) == 2)
    supervisors = faults.children(worker.pid)
    for pid in supervisors:
        os.kill(pid, signal.SIGSTOP)
    try:
        faults.kill9(first)
        faults.restart_redis_without_its_data(cluster.redis)
        second = start_scheduler(cluster, "scheduler-2", **long)
        wait_until("the new scheduler has looked for both tries",
                   lambda: len(events(cluster, "try_adopted")) + len(events(cluster, "try_lost")) >= 2)
    finally:
        for pid in supervisors:
            os.kill(pid, signal.SIGCONT)
    go.touch()
    assert second.wait(120) == 0, cluster.procs.output(second)
    assert sorted(states(cluster)) == [("t0", 1, "success"), ("t1", 1, "success")]
    assert not events(cluster, "try_lost")
    holds_invariants(cluster, trace)


def test_a_partitioned_worker_fences_its_try_before_it_is_declared_lost_and_the_task_runs_once_elsewhere(
        cluster: Cluster) -> None:
    if (missing := faults.missing_capability("netns")) is not None:
        pytest.skip(missing)
    with faults.network_namespace(0) as ns:
        cluster.redis.binds = ("127.0.0.1", ns.host)  # (the namespace reaches Redis on this side's address)
        cluster.redis.stop()
        cluster.redis.start()
        trace, go = traced(cluster, 1)
        cluster.start_webserver(host="0.0.0.0", LEDGER_WEB_TOKEN="chaos-web-token",  # (reached on both sides)
                                LEDGER_WEB_ALLOWED_HOSTS=f"127.0.0.1,{ns.host}")
        short = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "4"}  # the lease: the partition outlasts it
        cluster.start_worker("wp", prefix=ns.prefix(), broker=f"redis://{ns.host}:{cluster.redis.port}/0",
                             api_url=f"http://{ns.host}:{cluster.web_port}", **short)
        scheduler = start_scheduler(cluster, **short)
        wait_until("try 1 runs in the namespace", lambda: running(cluster, 1) and executions(trace) == 1)
        cluster.start_worker("w2", api_url=f"http://127.0.0.1:{cluster.web_port}")
        (first,) = read_trace(trace)[0].values()
        ns.partition()
        wait_until("try 1 is recorded lost", lambda: ("t0", 1, "lost") in states(cluster))
        assert faults.gone(first[0].pid, first[0].ticks), "try 1 was declared lost while it still ran"
        wait_until("try 2 runs on the other worker", lambda: executions(trace) == 2)
        ns.heal()
        client = redis.Redis.from_url(cluster.redis.url)
        (tid,) = first_task_ids(cluster)  # (the DAG's one task instance)
        kept = f"celery-task-meta-{tid}"
        wait_until("the partitioned worker stores the outcome it kept: it killed its try",
                   lambda: b"killed it: its lease could not be renewed within 4 s (Redis unreachable)"
                   in (client.get(kept) or b""))
        client.close()
        go.touch()
        assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s, h) for _t, _r, n, s, h in tries(cluster, "chaos")] == [(1, "lost", "wp"), (2, "success", "w2")]
    (lost,) = events(cluster, "try_lost")
    assert "worker wp stopped renewing its lease (4 s" in str(lost["details"]["reason"])  # type: ignore[index]
    holds_invariants(cluster, trace)


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[faults.SmallDisk]:
    """The scheduler's LEDGER_HOME (its database, its logs) on a small tmpfs (ask for it before `cluster`)."""
    if (missing := faults.missing_capability("tmpfs")) is not None:
        pytest.skip(missing)
    with faults.small_disk(tmp_path / "home") as disk:
        yield disk


def test_a_full_disk_on_the_schedulers_host_makes_it_wait_and_say_so_and_records_each_try_as_it_ended(
        small_home: faults.SmallDisk, cluster: Cluster) -> None:
    trace, go = traced(cluster, 2)  # (both outside the full disk)
    cluster.start_webserver()
    cluster.start_worker("w1")
    scheduler = start_scheduler(cluster)
    wait_until("two tries run", lambda: running(cluster, 2) and executions(trace) == 2)
    # the database's write-ahead log emptied, so that the scheduler's next writes need room on the disk
    wait_until("the write-ahead log is emptied", lambda: checkpointed(cluster.home / "ledger.db"))
    small_home.fill()
    full = "database error, retrying in"

    def says(text: str, times: int = 1) -> bool:
        out = cluster.procs.output(scheduler)
        assert scheduler.poll() is None, f"the scheduler exited while the disk was full:\n{out}"
        return out.count(text) >= times

    wait_until("the scheduler says it waits", lambda: says(full))
    assert "database or disk is full" in cluster.procs.output(scheduler)
    go.touch()  # the tries end while the disk is full
    client = redis.Redis.from_url(cluster.redis.url)
    metas = [f"celery-task-meta-{tid}" for tid in first_task_ids(cluster)]
    wait_until("the tries' outcomes are stored", lambda: all(b'"success"' in (client.get(m) or b"") for m in metas))
    client.close()
    seen = cluster.procs.output(scheduler).count(full)
    wait_until("the scheduler tried again since", lambda: says(full, seen + 1))
    small_home.free()
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert sorted(states(cluster)) == [("t0", 1, "success"), ("t1", 1, "success")]
    assert not events(cluster, "try_lost")
    assert "database reachable again after" in cluster.procs.output(scheduler)
    holds_invariants(cluster, trace)


def checkpointed(database: Path) -> bool:
    with contextlib.closing(sqlite3.connect(database, timeout=1)) as db:
        busy, _frames, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return bool(busy == 0)


def test_every_fault_of_the_fleet_in_one_run_leaves_each_try_run_once_and_recorded_as_it_ended(
        small_home: faults.SmallDisk, cluster: Cluster) -> None:
    """One run meets them all, one after the other, each while tries run: a second worker with a live worker's
    name, kill -9 of a pool process, of a worker's main process (restarted), a partition of the worker in the
    network namespace, Redis restarted with and without its data, kill -9 of the scheduler (restarted), the
    webserver restarted, the scheduler's disk filled and freed."""
    if (missing := faults.missing_capability("netns")) is not None:
        pytest.skip(missing)
    short = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "4"}
    # (messages Redis lost with its data are sent again after the queued timeout; no task fails by lost tries)
    patient = {**short, "LEDGER_CELERY_QUEUED_TIMEOUT": "20", "LEDGER_MAX_LOST_TRIES": "10"}
    with faults.network_namespace(1) as ns:
        cluster.redis.binds = ("127.0.0.1", ns.host)
        cluster.redis.stop()
        cluster.redis.start()
        trace, go = traced(cluster, 6)
        web = {"LEDGER_WEB_TOKEN": "chaos-web-token", "LEDGER_WEB_ALLOWED_HOSTS": f"127.0.0.1,{ns.host}"}
        webserver = cluster.start_webserver(host="0.0.0.0", **web)
        loopback = f"http://127.0.0.1:{cluster.web_port}"
        cluster.start_worker("wp", prefix=ns.prefix(), broker=f"redis://{ns.host}:{cluster.redis.port}/0",
                             api_url=f"http://{ns.host}:{cluster.web_port}", **short)
        workers = {"w1": cluster.start_worker("w1", api_url=loopback, **short)}
        scheduler = start_scheduler(cluster, **patient)
        wait_until("four tries run", lambda: running(cluster, 4) and executions(trace) == 4)

        twin = cluster.start_worker("w1", wait=False, label="twin-w1", api_url=loopback, **short)
        assert twin.wait(60) != 0 and "is held by a live worker" in cluster.procs.output(twin)

        def lost(n: int) -> bool:
            return sum(1 for *_, s in states(cluster) if s == "lost") >= n

        hosts = {t: h for t, _r, _n, s, h in tries(cluster, "chaos") if s == "running"}
        os.kill(faults.children(workers["w1"].pid)[0], signal.SIGKILL)  # a pool process of w1 (one runs a try)
        faults.kill9(workers["w1"])  # and then its main process
        wait_until("w1's tries are lost", lambda: lost(sum(1 for h in hosts.values() if h == "w1")))
        workers["w1"] = cluster.start_worker("w1", api_url=loopback, label="w1-again", **short)
        ns.partition()
        wait_until("wp's tries are lost", lambda: lost(4))
        ns.heal()
        wait_until("tries run again", lambda: sum(1 for *_, s in states(cluster) if s == "running") >= 2)
        cluster.redis.stop()
        cluster.redis.start()
        faults.restart_redis_without_its_data(cluster.redis)
        faults.kill9(scheduler)
        scheduler = start_scheduler(cluster, "scheduler-2", **patient)
        os.killpg(webserver.pid, signal.SIGTERM)
        webserver.wait(30)
        webserver = cluster.start_webserver(host="0.0.0.0", port=cluster.web_port, **web)
        wait_until("the write-ahead log is emptied", lambda: checkpointed(cluster.home / "ledger.db"))
        small_home.fill()
        wait_until("the scheduler waits for disk", lambda: "database or disk is full" in cluster.procs.output(scheduler)
                   or scheduler.poll() is not None)
        small_home.free()
        go.touch()
        assert scheduler.wait(240) == 0, cluster.procs.output(scheduler)
    assert {s for *_, s in states(cluster)} <= {"success", "lost"}, states(cluster)
    assert query(cluster, "SELECT DISTINCT state FROM task_instance") == [("success",)]
    holds_invariants(cluster, trace)
