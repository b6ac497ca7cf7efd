"""Operators see the faults of a Celery fleet (issue 40, part 5), caused for real: the test's redis-server stopped
and started again while tries run, a webserver that is not there when a worker first needs a version. The scheduler
and the worker each say one line when a kind of work starts failing and one when it works again, and count both
(`ledger_fleet_faults_total`, `ledger_fleet_recoveries_total`, by component and kind, on the scheduler's
--metrics-port and the worker's); `ledger workers` shows each worker's incarnations and its tries' leases, and one
line when Redis cannot be reached."""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest
import redis

from ledger.infra.workers import (
    WORKER_NAMES,
    WORKERS,
    fleet,
    incarnations_key,
    lease_key,
    running_key,
    worker_key,
)
from ledger.scheduler.executors.fleet_faults import FaultNotes, Relay, counters_of
from ledger.scheduler.loop.metrics import SchedulerMetrics
from ledger.scheduler.runtime.try_lease import dead_value, taken_value
from tests.celery_cluster import Cluster, RedisServer, free_port
from tests.scheduler.test_celery_executor import ledger, tries, wait_until, write_dag
from tests.scheduler.test_celery_faults import ran, start_scheduler, traced_dag

pytestmark = pytest.mark.timeout(240)


def metric(port: int, name: str, **labels: str) -> float:
    """A sample's value as served on 127.0.0.1:port/metrics (0 when it is not there)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        found = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if found and ",".join(sorted(found.group(1).split(","))) == want:
            return float(found.group(2))
    return 0.0


def said(output: str, text: str) -> list[str]:
    """The lines that say `text` (a worker's own lines come through Celery's log, after its time and process)."""
    return [line[line.index(text):] for line in output.splitlines() if text in line]


def test_a_redis_outage_is_said_once_and_counted_by_the_scheduler_and_the_worker_with_its_recovery(
        cluster: Cluster) -> None:
    gate = cluster.home.parent / "gate"  # each try prints until the test writes its gate (gate-t0, gate-t1)
    trace = traced_dag(cluster, 2, f'while [ ! -f {gate}-$T ]; do echo waiting; sleep 0.1; done')
    cluster.start_webserver()
    wport, sport = free_port(), free_port()
    lease = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "30"}  # beats and renewals every 10 s; leases outlast the outage
    worker = cluster.start_worker("w1", args=("--metrics-port", str(wport)), **lease)
    scheduler = start_scheduler(cluster, LEDGER_METRICS_PORT=str(sport), **lease)
    wait_until("both tries run", lambda: [s for *_, s, _h in tries(cluster, "traced")] == ["running", "running"])

    shown = json.loads(ledger(cluster, "workers", "--json").stdout)
    (w1,) = shown
    assert w1["name"] == "w1" and w1["live"] and w1["pid"] == worker.pid
    assert [(i["pid"], i["state"]) for i in w1["incarnations"]] == [(worker.pid, "current")]
    assert sorted(lease["try_number"] for lease in w1["leases"]) == [1, 1]
    assert all(lease["holder"].startswith("w1 ") and 0 < lease["expires_in"] <= 30 for lease in w1["leases"]), w1
    table = ledger(cluster, "workers").stdout
    assert "incarnations" in table and "current" in table and "expires in" in table, table

    cluster.redis.stop()
    wait_until("the worker and the scheduler say the fault", lambda: (
        said(cluster.procs.output(worker), "ledger worker w1: cannot beat (")
        and said(cluster.procs.output(worker), "ledger worker w1: cannot renew tries' leases in Redis (")
        and "reading the tries' states from Redis fails (" in cluster.procs.output(scheduler)))
    down = ledger(cluster, "workers")
    assert down.returncode != 0 and "Traceback" not in down.stderr
    assert down.stderr.strip().count("\n") == 0 and "cannot read the workers from redis://127.0.0.1:" in down.stderr
    assert metric(sport, "ledger_fleet_faults_total", component="executor", kind="read") == 1
    assert metric(sport, "ledger_fleet_failing", component="executor", kind="read") == 1
    assert metric(wport, "ledger_fleet_faults_total", component="worker", kind="beat") == 1

    cluster.redis.start()
    wait_until("the worker and the scheduler say the recovery", lambda: (
        said(cluster.procs.output(worker), "ledger worker w1: beats again")
        and said(cluster.procs.output(worker), "ledger worker w1: renewing tries' leases works again")
        and "reading the tries' states from Redis works again" in cluster.procs.output(scheduler)))
    assert metric(sport, "ledger_fleet_recoveries_total", component="executor", kind="read") == 1
    assert metric(sport, "ledger_fleet_failing", component="executor", kind="read") == 0
    assert metric(wport, "ledger_fleet_recoveries_total", component="worker", kind="beat") == 1
    # each pool process running a try renews its lease: one fault and one recovery each, counted across processes
    assert metric(wport, "ledger_fleet_faults_total", component="worker", kind="lease") == 2
    assert metric(wport, "ledger_fleet_recoveries_total", component="worker", kind="lease") == 2

    for task in ("t0", "t1"):
        (gate.parent / f"gate-{task}").touch()
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert ran(trace) == {t: [("start", "1"), ("end", "1")] for t in ("t0", "t1")}
    assert [s for *_, s, _h in tries(cluster, "traced")] == ["success", "success"]
    out = cluster.procs.output(worker)
    assert len(said(out, "ledger worker w1: cannot beat (")) == 1, out  # however many beats failed
    assert len(said(out, "ledger worker w1: beats again")) == 1, out
    sched = cluster.procs.output(scheduler)
    assert sched.count("reading the tries' states from Redis fails (") == 1, sched


def test_a_webserver_that_is_not_there_when_a_worker_needs_code_is_said_once_and_counted_with_its_return(
        cluster: Cluster) -> None:
    trace = traced_dag(cluster, 1, "true")
    port, wport = free_port(), free_port()
    worker = cluster.start_worker("w1", api_url=f"http://127.0.0.1:{port}", args=("--metrics-port", str(wport)))
    scheduler = start_scheduler(cluster)
    wait_until("the worker says it cannot fetch the code",
               lambda: said(cluster.procs.output(worker), "ledger worker w1: cannot fetch the code of traced"))
    assert metric(wport, "ledger_fleet_faults_total", component="worker", kind="code") == 1
    cluster.start_webserver(port=port)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}
    out = cluster.procs.output(worker)
    (fault,) = said(out, "ledger worker w1: cannot fetch the code of traced")  # once, however often it asked
    assert "refused" in fault and fault.endswith("asking again with back-off for up to 30 s per try"), fault
    assert said(out, "ledger worker w1: the webserver gives code again") != []
    assert metric(wport, "ledger_fleet_recoveries_total", component="worker", kind="code") == 1


CALLS = """
import os
import time
import pendulum
from ledger import DAG, PythonTask
from ledger.sdk.secrets import Variable

def calls():
    print("first", Variable.get("color"), flush=True)  # the webserver answers
    open("@ASKED@", "w").close()
    for _ in range(1200):  # the test stops the webserver, then writes DOWN
        if os.path.exists("@DOWN@"):
            break
        time.sleep(0.05)
    failed = 0
    while True:  # until the test has started the webserver again
        try:
            value = Variable.get("color")
            break
        except Exception as exc:
            failed += 1
            with open("@FAILED@", "a") as seen:
                seen.write(f"{exc}\\n")
            time.sleep(0.05)
    print("again", value, "after", failed, "failed calls", flush=True)

with DAG("calls", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("calls", calls)
"""


@pytest.mark.timeout(480)  # (the webserver is started twice: at load 30, a start takes over 20 s)
def test_task_codes_calls_to_a_stopped_webserver_are_said_once_by_the_worker_and_counted_with_their_recovery(
        cluster: Cluster, tmp_path: Path) -> None:
    asked, down, failed = tmp_path / "asked", tmp_path / "down", tmp_path / "failed"
    write_dag(cluster, "calls.py", CALLS.replace("@ASKED@", str(asked)).replace("@DOWN@", str(down))
              .replace("@FAILED@", str(failed)))
    for args in (("variables", "set", "color", "blue"), ("dags", "list"), ("trigger", "calls")):
        done = ledger(cluster, *args)
        assert done.returncode == 0, done.stdout + done.stderr
    web = cluster.start_webserver()
    wport = free_port()
    worker = cluster.start_worker("w1", args=("--metrics-port", str(wport)))
    scheduler = start_scheduler(cluster)
    wait_until("the task's first call answered", asked.exists)
    os.killpg(web.pid, signal.SIGTERM)
    web.wait(30)
    down.touch()
    wait_until("the worker says the task's calls fail, and three of them failed", lambda: (
        said(cluster.procs.output(worker), "ledger worker w1: task code cannot reach ledger's webserver (")
        and failed.exists() and len(failed.read_text().splitlines()) >= 3))
    assert metric(wport, "ledger_fleet_faults_total", component="worker", kind="api") == 1
    assert metric(wport, "ledger_fleet_failing", component="worker", kind="api") == 1
    cluster.start_webserver(port=cluster.web_port)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "calls")] == [(1, "success")]
    out = cluster.procs.output(worker)
    (fault,) = said(out, "ledger worker w1: task code cannot reach ledger's webserver (")  # however many calls failed
    assert "Connection refused" in fault and fault.endswith("; its calls fail"), fault
    assert len(said(out, "ledger worker w1: task code reaches ledger's webserver again")) == 1, out
    assert metric(wport, "ledger_fleet_recoveries_total", component="worker", kind="api") == 1
    assert metric(wport, "ledger_fleet_failing", component="worker", kind="api") == 0
    log = ledger(cluster, "tasks", "logs", "calls", "1", "calls").stdout
    assert "first blue\n" in log and "again blue after" in log, log


def test_a_relay_says_once_what_the_processes_it_forks_note_however_many_calls_and_processes() -> None:
    lines: list[str] = []
    metrics = SchedulerMetrics()
    relay = Relay(FaultNotes("worker", lines.append, counters_of(metrics)), "api", "calls fail ({error})",
                  "calls work again")

    def forked(*noted: str | None) -> None:  # a try's process: its calls, as they went
        pid = os.fork()
        if pid == 0:
            try:
                for error in noted:
                    relay.note(error)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        relay.take()

    forked(None, "refused 1", "refused 2")
    forked("refused 3")  # (another try, while the calls still fail)
    forked("refused 4", None, None)
    forked(None)
    relay.note("HTTP 503")  # noted in the relay's own process (a Spark try's): said at once
    assert lines == ["calls fail (refused 1)", "calls work again", "calls fail (HTTP 503)"]
    sample = metrics.registry.get_sample_value
    assert sample("ledger_fleet_faults_total", {"component": "worker", "kind": "api"}) == 2
    assert sample("ledger_fleet_recoveries_total", {"component": "worker", "kind": "api"}) == 1
    assert sample("ledger_fleet_failing", {"component": "worker", "kind": "api"}) == 1


def test_fault_notes_say_a_kind_of_work_once_when_it_starts_failing_and_once_when_it_works_again() -> None:
    lines: list[str] = []
    metrics = SchedulerMetrics()
    notes = FaultNotes("executor", lines.append, counters_of(metrics))
    for attempt in range(3):
        notes.failed("read", "reading fails ({error})", ConnectionError(f"refused {attempt}"))
    notes.works("send", "sending works again")  # (it was not failing: nothing said)
    assert notes.error("read") == "ConnectionError: refused 2"  # the last error
    notes.works("read", "reading works again")
    notes.works("read", "reading works again")
    notes.failed("read", "reading fails ({error})", "timed out")
    assert lines == ["reading fails (ConnectionError: refused 0)", "reading works again", "reading fails (timed out)"]
    sample = metrics.registry.get_sample_value
    assert sample("ledger_fleet_faults_total", {"component": "executor", "kind": "read"}) == 2
    assert sample("ledger_fleet_recoveries_total", {"component": "executor", "kind": "read"}) == 1
    assert sample("ledger_fleet_failing", {"component": "executor", "kind": "read"}) == 1
    assert sample("ledger_fleet_faults_total", {"component": "executor", "kind": "send"}) is None


def test_the_fleet_shows_each_names_incarnations_current_or_gone_and_how_each_running_trys_lease_stands(
        redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)

    def beat(name: str, incarnation: str, pid: int, started: float, at: float, *, live: bool) -> None:
        entry = json.dumps({"name": name, "host": "h", "pid": pid, "queues": ["default"], "concurrency": 2,
                            "running": [], "heartbeat": at, "started": started, "incarnation": incarnation})
        if live:
            client.set(worker_key(name), entry)
            client.sadd(WORKERS, name)
        client.hset(incarnations_key(name), incarnation, entry)
        client.sadd(WORKER_NAMES, name)

    beat("w1", "old", 10, 100.0, 150.0, live=False)
    beat("w1", "new", 11, 200.0, 290.0, live=True)
    beat("w2", "only", 12, 100.0, 120.0, live=False)  # its entry expired: no live worker of that name
    client.sadd(WORKER_NAMES, "w3")  # nothing on record any more: dropped
    client.sadd(running_key("w1"), "ledger-5-1", "ledger-6-1", "ledger-7-2", "ledger-8-1")
    client.set(lease_key("ledger-5-1"), '{"by":"w1 new","pool":21,"pgid":22,"ms":30000}', px=20000)
    client.set(lease_key("ledger-6-1"), dead_value("the pool process running it (pid 23) died"))
    client.set(lease_key("ledger-7-2"), taken_value("worker w1 stopped renewing its lease"))
    # ledger-8-1: no lease (it expired)
    shown = {w["name"]: w for w in fleet(redis_server.url, now=300.0)}
    assert sorted(shown) == ["w1", "w2"] and not client.sismember(WORKER_NAMES, "w3")
    assert [(i["incarnation"], i["pid"], i["state"], i["seconds_since_heartbeat"])
            for i in shown["w1"]["incarnations"]] == [("new", 11, "current", 10.0), ("old", 10, "gone", 150.0)]
    assert shown["w1"]["live"] and not shown["w2"]["live"]
    assert [i["state"] for i in shown["w2"]["incarnations"]] == ["gone"] and shown["w2"]["leases"] == []
    leases = {lease["task_id"]: lease for lease in shown["w1"]["leases"]}
    assert leases["ledger-5-1"]["holder"] == "w1 new (pool process 21)"
    assert 0 < leases["ledger-5-1"]["expires_in"] <= 20 and leases["ledger-5-1"]["ended"] is None
    assert (leases["ledger-6-1"]["ti_id"], leases["ledger-6-1"]["ended"]) == (
        6, "dead: the pool process running it (pid 23) died")
    assert (leases["ledger-7-2"]["try_number"], leases["ledger-7-2"]["ended"]) == (
        2, "taken: worker w1 stopped renewing its lease")
    assert (leases["ledger-8-1"]["holder"], leases["ledger-8-1"]["ended"]) == (None, "expired")
