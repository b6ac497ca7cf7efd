"""The CeleryExecutor for real: a redis-server on a private loopback port, ledger's webserver, `ledger worker`
processes in LEDGER_HOMEs of their own with no DAGs folder and no database, and the real `ledger scheduler`."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import textwrap
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.scheduler.executors.celery_app import TASK_NAME, CeleryConfig, item_to_json, make_app, task_id
from ledger.scheduler.loop.metrics import SchedulerMetrics
from tests import launcher
from tests.celery_cluster import Cluster, PinnedCelery
from tests.chaos import faults
from tests.conftest import LEDGER, Cli
from tests.scheduler.test_executors import run_all
from tests.scheduler.test_task_runner import work_item

pytestmark = pytest.mark.timeout(180)


def query(cluster: Cluster, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(cluster.home / "ledger.db") as db:
        return db.execute(sql, args).fetchall()


def ledger(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return launcher.run([LEDGER, *args], env=cluster.scheduler_env(**env), cwd=cluster.home, capture_output=True,
                        text=True, timeout=120)


def write_dag(cluster: Cluster, name: str, source: str) -> None:
    (cluster.home / "dags" / name).write_text(textwrap.dedent(source))


def wait_until(what: str, check: Callable[[], bool], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def tries(cluster: Cluster, dag_id: str) -> list[tuple[str, int, int, str, str | None]]:
    """(task id, run id, try number, state, hostname) of every try of a DAG."""
    return [tuple(r) for r in query(cluster, (
        "SELECT ti.task_id, ti.run_id, t.try_number, t.state, t.hostname FROM task_try t "
        "JOIN task_instance ti ON ti.id = t.task_instance_id WHERE ti.dag_id = ? ORDER BY ti.run_id, ti.task_id, "
        "t.try_number"), dag_id)]  # type: ignore[misc]


CATCH_UP = """
import pendulum
from ledger import DAG, PythonTask

def noop():
    pass

with DAG("many", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 4, 9, tz="UTC"), catchup=True, max_active_runs=100) as dag:
    PythonTask("anywhere", noop) >> PythonTask("routed", noop, queue="other")
"""


def test_two_workers_without_dags_folders_run_a_catch_up_each_try_once_on_the_queue_it_names(
        cluster: Cluster) -> None:
    write_dag(cluster, "many.py", CATCH_UP)
    cluster.start_webserver()
    cluster.start_worker("w1", queues="default", concurrency=2)
    cluster.start_worker("w2", queues="default,other", concurrency=2)
    listed = json.loads(ledger(cluster, "workers", "--json").stdout)
    assert {(w["name"], tuple(w["queues"]), w["concurrency"], w["running"]) for w in listed} == {
        ("w1", ("default",), 2, 0), ("w2", ("default", "other"), 2, 0)}
    with urllib.request.urlopen(f"{cluster.api_url}/api/v1/workers", timeout=30) as answer:
        assert [w["name"] for w in json.loads(answer.read())] == ["w1", "w2"]
    began = time.monotonic()
    done = ledger(cluster, "scheduler", "--executor", "celery", "--parallelism", "8", "--exit-when-idle")
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout + done.stderr
    rows = tries(cluster, "many")
    assert len(rows) == 200, rows[:5]
    assert Counter((task, run) for task, run, *_ in rows).most_common(1)[0][1] == 1  # each task instance once
    assert {(n, state) for _t, _r, n, state, _h in rows} == {(1, "success")}
    hosts = Counter((task, host) for task, _r, _n, _s, host in rows)
    assert hosts[("routed", "w2")] == 100  # only w2 takes the `other` queue
    assert hosts[("anywhere", "w1")] > 0 and hosts[("anywhere", "w2")] > 0, hosts
    for name in ("w1", "w2"):  # no DAGs folder, no database: the code came by hash from the webserver
        home = cluster.worker_home(name)
        assert not (home / "dags").exists() and not (home / "ledger.db").exists()
        assert list((home / "code" / "snapshots").iterdir())
    log = (cluster.home / "logs" / "many" / "run_1" / "routed" / "try_1.log").read_text()
    assert "outcome: success" in log and str(cluster.worker_home("w2") / "code") in log  # kept here, centrally
    print(f"200 task instances on two workers in {took:.1f} s")


MAPPED_AND_PINNED = """
import os
import pendulum
from ledger import DAG, task

@task
def values():
    return [1, 2, 3]

@task
def double(x):
    print("EDITION", "@EDITION@", "doubles", x)
    for key in ("LEDGER_RUN_ID", "LEDGER_TRY_NUMBER", "LEDGER_MAP_INDEX", "LEDGER_DAG_VERSION", "LEDGER_CODE_DIR"):
        print(f"{key}={os.environ.get(key)}")
    return 2 * x

with DAG("pinned", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    double.expand(x=values())
"""


def test_a_run_triggered_before_its_dag_was_edited_runs_its_pinned_version_and_its_mapped_task_on_a_worker(
        cluster: Cluster) -> None:
    write_dag(cluster, "pinned.py", MAPPED_AND_PINNED.replace("@EDITION@", "first"))
    assert ledger(cluster, "dags", "list").returncode == 0
    trigger = ledger(cluster, "trigger", "pinned")
    assert trigger.returncode == 0, trigger.stdout + trigger.stderr
    write_dag(cluster, "pinned.py", MAPPED_AND_PINNED.replace("@EDITION@", "second"))
    cluster.start_webserver()
    cluster.start_worker("w1")
    done = ledger(cluster, "scheduler", "--executor", "celery", "--exit-when-idle")
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    rows = tries(cluster, "pinned")
    assert [(t, s, h) for t, _r, _n, s, h in rows] == [("double", "success", "w1")] * 3 + [("values", "success", "w1")]
    passed = ledger(cluster, "tasks", "xcom", "pinned", "1", "double", "--map-index", "2", "--json")
    assert [(v["key"], v["value"]) for v in json.loads(passed.stdout)] == [("return_value", 6)], passed.stdout
    logs = sorted((cluster.home / "logs" / "pinned" / "run_1" / "double").glob("map_*/try_1.log"))
    assert len(logs) == 3
    assert all("EDITION first doubles" in p.read_text() for p in logs), [p.read_text() for p in logs]
    # a remote Python try gets the LEDGER_* environment of a local one: its run's pinned version, its code there
    shown = json.loads(ledger(cluster, "runs", "show", "1", "--json").stdout)
    for index, path in enumerate(logs):
        lines = path.read_text().splitlines()
        assert {"LEDGER_RUN_ID=1", "LEDGER_TRY_NUMBER=1", f"LEDGER_MAP_INDEX={index}",
                f"LEDGER_DAG_VERSION={shown['dag_version']}"} <= set(lines), lines
        code_dir = next(line for line in lines if line.startswith("LEDGER_CODE_DIR="))
        assert code_dir.startswith(f"LEDGER_CODE_DIR={cluster.worker_home('w1') / 'code'}"), code_dir
    # the values the tries passed on are in the database; the files that held them are gone from both hosts
    left = [p for home in (cluster.home, cluster.worker_home("w1")) for p in home.rglob("try_1.log.*")]
    assert left == [], left


SLOW = """
import time
import pendulum
from ledger import DAG, BashTask

with DAG("slow", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    for i in range(@N@):
        BashTask(f"t{i}", "echo begun; sleep @SECONDS@; echo done")
"""


def start_scheduler(cluster: Cluster, name: str = "scheduler") -> subprocess.Popen[bytes]:
    return cluster.procs.start(name, [LEDGER, "scheduler", "--executor", "celery", "--exit-when-idle"],
                               cluster.scheduler_env(), cluster.home)


def running_on(cluster: Cluster, dag_id: str) -> list[tuple[str, int, str | None]]:
    return [(t, n, h) for t, _r, n, s, h in tries(cluster, dag_id) if s == "running"]


def slow_dag(cluster: Cluster, n: int, seconds: float) -> None:
    write_dag(cluster, "slow.py", SLOW.replace("@N@", str(n)).replace("@SECONDS@", str(seconds)))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "slow").returncode == 0


def test_a_worker_killed_mid_try_gets_its_try_recorded_lost_and_the_task_succeeds_on_the_other_worker(
        cluster: Cluster) -> None:
    write_dag(cluster, "slow.py", SLOW.replace("@N@", "1").replace(
        "sleep @SECONDS@", "if [ $LEDGER_TRY_NUMBER = 1 ]; then sleep 120; fi"))  # the first try waits
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "slow").returncode == 0
    cluster.start_webserver()
    # the killed worker's lease is short: its try is lost 3 1/3 lease lengths after it was last seen held (the grace
    # and the wait for an outcome kept by a worker cut off from Redis, decision 0257), about 15 s where the
    # default's 10 s took 35-45 s; the other worker, started once try 1 runs on the first, keeps the default
    killed = cluster.start_worker("w1", LEDGER_WORKER_HEARTBEAT_TIMEOUT="4")
    scheduler = start_scheduler(cluster)
    wait_until("the try runs", lambda: len(running_on(cluster, "slow")) == 1)
    assert running_on(cluster, "slow") == [("t0", 1, "w1")]
    host, other = "w1", "w2"
    log = cluster.home / "logs" / "slow" / "run_1" / "t0" / "try_1.log"
    wait_until("its log, here while it runs", lambda: log.exists() and "\nbegun\n" in log.read_text())
    follow = cluster.procs.start("follow", [LEDGER, "tasks", "logs", "slow", "1", "t0", "--try", "1", "--follow"],
                                 cluster.scheduler_env(), cluster.home)
    wait_until("the log followed", lambda: "\nbegun\n" in cluster.procs.output(follow))
    cluster.start_worker(other)
    cluster.procs.kill9(killed)  # the worker, its pool and the try's process group
    assert scheduler.wait(60) == 0, cluster.procs.output(scheduler)
    assert follow.wait(30) == 0  # it followed try 1 until that try ended (lost)
    followed = cluster.procs.output(follow)
    assert "try 1/1: running" in followed and "\nbegun\n" in followed, followed
    assert [(n, s, h) for _t, _r, n, s, h in tries(cluster, "slow")] == [(1, "lost", host), (2, "success", other)]
    (lost,) = json.loads(ledger(cluster, "events", "--dag", "slow", "--kind", "try_lost", "--json").stdout)
    assert f"worker {host} stopped renewing its lease" in lost["details"]["reason"]
    assert "\nbegun\n" in log.read_text()  # readable after its worker is gone
    shutil.rmtree(cluster.home / "logs")  # and kept in the database: readable where the logs folder is not
    for n, said in ((1, "\nbegun\n"), (2, "\ndone\n")):
        kept = ledger(cluster, "tasks", "logs", "slow", "1", "t0", "--try", str(n))
        assert kept.returncode == 0 and said in kept.stdout, kept.stdout + kept.stderr
    with urllib.request.urlopen(f"{cluster.api_url}/runs/1/tasks/t0/tries/1/log", timeout=30) as page:
        assert "\nbegun\n" in page.read().decode()  # the web view's log page reads it there too


def test_a_scheduler_killed_while_remote_tries_run_is_replaced_by_one_that_adopts_them(cluster: Cluster) -> None:
    slow_dag(cluster, 2, 4)
    cluster.start_webserver()
    cluster.start_worker("w1")
    first = start_scheduler(cluster, "scheduler-1")
    wait_until("both tries run", lambda: len(running_on(cluster, "slow")) == 2)
    cluster.procs.kill9(first)
    second = start_scheduler(cluster, "scheduler-2")
    assert second.wait(60) == 0, cluster.procs.output(second)
    assert [(t, n, s, h) for t, _r, n, s, h in tries(cluster, "slow")] == [
        ("t0", 1, "success", "w1"), ("t1", 1, "success", "w1")]
    adopted = json.loads(ledger(cluster, "events", "--dag", "slow", "--kind", "try_adopted", "--json").stdout)
    assert sorted(e["details"]["task_id"] for e in adopted) == ["t0", "t1"]
    assert not json.loads(ledger(cluster, "events", "--dag", "slow", "--kind", "try_lost", "--json").stdout)
    assert "\ndone\n" in (cluster.home / "logs" / "slow" / "run_1" / "t0" / "try_1.log").read_text()


def test_a_redis_restart_mid_run_loses_no_try_and_runs_none_twice(cluster: Cluster) -> None:
    slow_dag(cluster, 6, 2)
    cluster.start_webserver()
    cluster.start_worker("w1", concurrency=2)
    scheduler = start_scheduler(cluster)
    wait_until("tries run", lambda: len(running_on(cluster, "slow")) == 2)
    cluster.redis.stop()
    time.sleep(1.0)
    cluster.redis.start()
    assert scheduler.wait(90) == 0, cluster.procs.output(scheduler)
    rows = tries(cluster, "slow")
    assert sorted((t, n, s) for t, _r, n, s, _h in rows) == [(f"t{i}", 1, "success") for i in range(6)], rows
    for i in range(6):  # each ran once: one "begun" in its log
        assert (cluster.home / "logs" / "slow" / "run_1" / f"t{i}" / "try_1.log").read_text().count("\nbegun\n") == 1


def test_a_redelivered_message_for_a_try_that_started_is_refused_and_reported(
        celery_demo: tuple[Cluster, str], dag_file: Path) -> None:
    cluster, version = celery_demo
    cluster.redis.flush()
    executor = PinnedCelery(2, CeleryConfig(cluster.redis.url, cluster.redis.url, 2.0))
    PinnedCelery.version = version
    executor.start()
    try:
        item = dataclasses.replace(work_item(dag_file, "noop", ti_id=41), dag_version=version)
        events = run_all(executor, [item])
        assert [e.kind for e in events[41]] == ["started", "finished"] and events[41][-1].state == "success"
        assert events[41][-1].host == "contract"
        again = make_app(executor.config)  # the same message once more, as a broker redelivers it
        again.send_task(TASK_NAME, args=[item_to_json(item)], task_id=task_id(41, 1, ""), queue="default")
        remarks: list[dict[str, Any]] = []
        wait_until("the refusal", lambda: bool(remarks.extend(executor.remarks()) or remarks), within=30)
        assert remarks == [{"kind": "try_redelivery_refused", "ti_id": 41, "try_number": 1, "host": "contract",
                            "reason": "a redelivered message for try 1 was refused by worker contract: contract had "
                                      "started it", "celery_task_id": task_id(41, 1, "")}]
        assert executor.drain() == []  # the try's outcome stands as its one run wrote it
        log = Path(item.log_path).read_text()
        assert log.count("outcome: success") == 1
    finally:
        executor.end(0)


def test_bad_worker_and_executor_settings_are_refused_with_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    assert cli.fails("worker", "--queues", ",").exit_code == 2
    assert "LEDGER_API_URL" in cli.fails("worker").stderr
    assert "LEDGER_CELERY_BROKER_URL is not set" in cli.fails("workers").stderr
    amqp = cli.run("workers", LEDGER_CELERY_BROKER_URL="amqp://guest@127.0.0.1//")
    assert amqp.exit_code == 1 and "LEDGER_CELERY_RESULT_BACKEND must be a redis:// URL" in amqp.stderr
    wrong = cli.fails("scheduler", "--executor", "kubernetes")
    assert wrong.exit_code == 2 and "local, sequential or celery" in wrong.stderr
    cli.dags.mkdir()
    missing = cli.run("scheduler", "--executor", "celery", "--num-runs", "1")
    assert missing.exit_code == 1 and "LEDGER_CELERY_BROKER_URL" in missing.stderr, missing.output
    assert "Traceback" not in missing.output


@pytest.fixture
def second_host() -> Iterator[tuple[str, str]]:
    """A network namespace joined to this one by a veth pair: (its name, the address this side has on the pair).
    A process started in it reaches this host only through that address; it is stopped before the namespace goes
    (tests/chaos/faults.py)."""
    if (missing := faults.missing_capability("netns")) is not None:
        pytest.skip(f"no second host: {missing}")
    with faults.network_namespace(2) as ns:
        yield ns.name, ns.host


def test_a_worker_on_a_second_host_reaches_redis_and_the_ledger_only_through_its_link(
        cluster: Cluster, second_host: tuple[str, str]) -> None:
    namespace, address = second_host
    cluster.redis.stop()  # again, listening on the link's address too
    cluster.redis.binds = ("127.0.0.1", address)
    cluster.redis.start()
    write_dag(cluster, "far.py", SLOW.replace("slow", "far").replace("@N@", "3").replace("@SECONDS@", "0"))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "far").returncode == 0
    cluster.start_webserver(host=address, LEDGER_WEB_TOKEN="web-secret")  # not loopback: a token is required
    unreachable = subprocess.run(["ip", "netns", "exec", namespace, "python3", "-c",
                                  f"import socket; socket.create_connection(('127.0.0.1', {cluster.redis.port}), 2)"],
                                 capture_output=True)
    assert unreachable.returncode != 0  # the namespace's loopback is its own
    cluster.start_worker("far", prefix=("ip", "netns", "exec", namespace),
                         broker=f"redis://{address}:{cluster.redis.port}/0")
    done = ledger(cluster, "scheduler", "--executor", "celery", "--exit-when-idle")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(n, s, h) for _t, _r, n, s, h in tries(cluster, "far")] == [(1, "success", "far")] * 3


def test_a_remote_try_asked_to_stop_ends_failed_with_the_reason(celery_demo: tuple[Cluster, str],
                                                                 dag_file: Path) -> None:
    cluster, version = celery_demo
    cluster.redis.flush()
    executor = PinnedCelery(2, CeleryConfig(cluster.redis.url, cluster.redis.url, 2.0))
    PinnedCelery.version = version
    metrics = SchedulerMetrics()
    executor.use_metrics(metrics)
    executor.start()
    try:
        executor.submit(work_item(dag_file, "sleepy", ti_id=51))
        seen: list[Any] = []
        wait_until("the try starts", lambda: bool(seen.extend(executor.drain()) or seen), within=30)
        assert [e.kind for e in seen] == ["started"]
        wait_until("the queue's gauges", lambda: metrics.registry.get_sample_value(
            "ledger_queue_running_tries", {"queue": "default"}) == 1)
        assert metrics.registry.get_sample_value("ledger_queue_queued_tries", {"queue": "default"}) == 0
        assert executor.kill(51, "stopped by signal 9")
        wait_until("the try ends", lambda: bool(seen.extend(executor.drain()) or len(seen) > 1), within=30)
        assert [(e.kind, e.state, e.reason) for e in seen[1:]] == [("finished", "failed", "stopped by signal 9")]
    finally:
        executor.end(0)


SPARK = """
import pendulum
from ledger import DAG
from ledger.sdk.spark import SparkTask

def count(spark, context):
    print("counted", spark.range(10).count())

with DAG("sp", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    SparkTask("count", count, queue="spark")
"""


def run_on_a_spark_worker(cluster: Cluster, dag_id: str, source: str) -> subprocess.Popen[bytes]:
    """The DAG triggered once and run by the scheduler to its end on worker `sparky` (one pool process, queue
    `spark`), which is returned."""
    write_dag(cluster, f"{dag_id}.py", source)
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", dag_id).returncode == 0
    cluster.start_webserver()
    worker = cluster.start_worker("sparky", queues="spark", concurrency=1)
    done = ledger(cluster, "scheduler", "--executor", "celery", "--exit-when-idle")
    assert done.returncode == 0, done.stdout + done.stderr
    return worker


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_spark_task_runs_on_the_worker_of_its_queue(cluster: Cluster) -> None:
    run_on_a_spark_worker(cluster, "sp", SPARK)
    assert [(n, s, h) for _t, _r, n, s, h in tries(cluster, "sp")] == [(1, "success", "sparky")]
    log = (cluster.home / "logs" / "sp" / "run_1" / "count" / "try_1.log").read_text()
    assert "Spark session started" in log and "\ncounted 10\n" in log, log


JVM_DIES = """
import os
import signal
from datetime import timedelta

import pendulum
from ledger import DAG
from ledger.sdk.spark import SparkTask

def jvm_of(spark):
    return int(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName()
               .split("@")[0])

def dies(spark, context):
    jvm = jvm_of(spark)
    print("JVM", jvm, "try", context.try_number)
    os.kill(jvm, signal.SIGKILL)  # the driver's JVM killed, as the kernel's OOM killer kills it
    if context.try_number == 1:  # during the try: it fails
        spark.range(10).count()
    # try 2 succeeds: its JVM dies after its code (while the pool process waits for its next try)

def after(spark, context):
    print("JVM", jvm_of(spark), "after, try", context.try_number)

with DAG("jvm", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    SparkTask("dies", dies, queue="spark", retries=1, retry_delay=timedelta(0)) >> SparkTask(
        "after", after, queue="spark", retries=0)
"""


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_pool_process_whose_jvm_died_is_replaced_and_a_try_that_finds_it_dead_is_lost(cluster: Cluster) -> None:
    worker = run_on_a_spark_worker(cluster, "jvm", JVM_DIES)
    # the JVM killed during a try: that try failed (its code ran), its retry ran on a new pool process and JVM; killed
    # after a try's code: the next try found it dead before its code ran, lost (no retry spent: `after` has none),
    # and its new try ran on a new pool process and JVM again
    assert [(t, n, s) for t, _r, n, s, _h in tries(cluster, "jvm")] == [
        ("after", 1, "lost"), ("after", 2, "success"), ("dies", 1, "failed"), ("dies", 2, "success")]
    logs = cluster.home / "logs" / "jvm" / "run_1"
    first, second, lost, after = ((logs / task / f"try_{n}.log").read_text() for task, n in (
        ("dies", 1), ("dies", 2), ("after", 1), ("after", 2)))
    assert "the worker's Spark driver (JVM) is gone: this worker will be replaced" in first, first
    assert "died before this try's code ran" in lost and "JVM " not in lost, lost
    jvms = [int(line.split()[1]) for log in (first, second, after) for line in log.splitlines()
            if line.startswith("JVM ")]
    assert len(jvms) == 3 and len(set(jvms)) == 3, jvms  # a new JVM each time
    said = cluster.procs.output(worker)
    assert said.count("Celery starts another in its place") == 2, said
